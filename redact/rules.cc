#include "redact/rules.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "base/escape.h"
#include "redact/pattern.h"

namespace trace::redact {
namespace {

// The built-in rules, in priority order: where two rules match text starting at the same
// place with the same length, the earlier name is reported.
const PatternRule kDefaultRules[] = {
    // PEM private key blocks (RSA, EC, OPENSSH, encrypted PKCS#8, PGP), also when the
    // block is cut off before its END line (then up to the end of the text).
    {"private-key",
     R"(-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|\z))"},
    {"anthropic-api-key", R"(\bsk-ant-[A-Za-z0-9_\-]{20,})"},
    // OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-) and the providers that copied the
    // shape (DeepSeek, ...): at least 20 characters, at least one digit.
    {"sk-api-key", R"(\bsk-(?=[A-Za-z0-9_\-]*[0-9])[A-Za-z0-9_\-]{20,})"},
    {"aws-access-key-id",
     R"(\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b)"},
    {"aws-secret-access-key",
     R"((?i)aws.{0,24}?(?:secret|private).{0,24}?[\s"'`:=]+(?<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+]))"},
    {"google-api-key", R"(\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-]))"},
    {"github-token", R"(\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}))"},
    {"gitlab-token", R"(\bglpat-[A-Za-z0-9_\-]{20,})"},
    {"slack-token", R"(\bxox[abposr]-[A-Za-z0-9\-]{10,})"},
    {"stripe-secret-key", R"(\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})"},
    {"huggingface-token", R"(\bhf_[A-Za-z0-9]{30,})"},
    {"groq-api-key", R"(\bgsk_[A-Za-z0-9]{40,})"},
    {"xai-api-key", R"(\bxai-[A-Za-z0-9]{60,})"},
    {"jwt", R"(\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})"},
    // The API key `trace record` gives the agent (recorder/session.cc RandomKey).
    {"trace-run-token", R"(\btrace-[0-9a-f]{32}\b)"},
    {"bearer-token", R"((?i)\bbearer\s+(?<secret>[A-Za-z0-9\-._~+/]{16,}=*))"},
    {"basic-auth", R"((?i)\bbasic\s+(?<secret>[A-Za-z0-9+/]{16,}={0,2})(?![A-Za-z0-9+/=]))"},
    {"url-password", R"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:"'<>]+:(?<secret>[^\s/?#@"'<>]+)@)"},
    // NAME=VALUE / "name": "value" where the name says password, secret, API key, access
    // or refresh token...; the value needs a letter (so "max_tokens": 100000 is left alone).
    {"secret-assignment",
     R"((?i)\b[A-Za-z0-9_.\-]*(?:password|passwd|secret|api[_\-]?key|access[_\-]?key|private[_\-]?key|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|[_\-.]token)[A-Za-z0-9_.\-]*\\?["']?\s*[:=]\s*\\?["']?(?<secret>(?=[^\s"',;&\\\[\]{}()<>]*[A-Za-z])[^\s"',;&\\\[\]{}()<>]{6,}))"},
};

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == ':';
  });
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

RuleSet RuleSet::Defaults() {
  RuleSet set;
  for (const PatternRule& r : kDefaultRules) set.patterns_.push_back(r);
  return set;
}

Status RuleSet::AddPattern(std::string name, std::string pattern) {
  if (!ValidName(name)) {
    return InvalidArgument("redaction rule name '" + EscapeForDisplay(name) +
                           "' must be 1-64 letters, digits, '.', '_', '-' or ':'");
  }
  TRACE_ASSIGN_OR_RETURN(CompiledPattern compiled, CompiledPattern::Compile(pattern));
  (void)compiled;
  patterns_.push_back({std::move(name), std::move(pattern)});
  return Status::Ok();
}

Status RuleSet::AddRulesFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string shown_path = EscapePathForDisplay(path);
  if (!in) return NotFound(shown_path + ": cannot open the redaction rules file");
  std::string line;
  int number = 0;
  int added = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    size_t name_end = line.find_first_of(" \t", start);
    std::string where = shown_path + ":" + std::to_string(number);
    if (name_end == std::string::npos) {
      return InvalidArgument(where + ": expected 'NAME REGEX', got only '" +
                             EscapeForDisplay(line.substr(start)) + "'");
    }
    size_t pattern_start = line.find_first_not_of(" \t", name_end);
    if (pattern_start == std::string::npos) {
      return InvalidArgument(where + ": rule '" +
                             EscapeForDisplay(line.substr(start, name_end - start)) +
                             "' has no regex");
    }
    Status st = AddPattern(line.substr(start, name_end - start), line.substr(pattern_start));
    if (!st.ok()) return InvalidArgument(where + ": " + st.message());
    ++added;
  }
  if (in.bad()) return IOError(shown_path + ": read error");
  if (added == 0) return InvalidArgument(shown_path + ": no rules (expected lines 'NAME REGEX')");
  return Status::Ok();
}

void RuleSet::AddLiteral(std::string name, std::string value) {
  if (value.size() < kMinLiteralBytes) return;
  if (std::all_of(value.begin(), value.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return;
  }
  for (const LiteralRule& l : literals_) {
    if (l.value == value) return;
  }
  literals_.push_back({std::move(name), std::move(value)});
}

void RuleSet::AddSecretEnvironment(char** envp) {
  for (char** e = envp; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string_view name = kv.substr(0, eq);
    if (NameLooksSecret(name))
      AddLiteral("env:" + std::string(name), std::string(kv.substr(eq + 1)));
  }
}

bool RuleSet::NameLooksSecret(std::string_view name) {
  static const char* kSegments[] = {"KEY",    "APIKEY", "TOKEN",      "SECRET",      "PASSWORD",
                                    "PASSWD", "PASS",   "CREDENTIAL", "CREDENTIALS", "PAT"};
  std::string upper = Upper(name);
  for (const char* suffix : {"KEY", "TOKEN", "SECRET", "PASSWORD"}) {
    if (EndsWith(upper, suffix)) return true;
  }
  size_t start = 0;
  while (start <= upper.size()) {
    size_t end = upper.find_first_of("_-.", start);
    if (end == std::string::npos) end = upper.size();
    std::string_view segment(upper.data() + start, end - start);
    for (const char* s : kSegments) {
      if (segment == s) return true;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace trace::redact
