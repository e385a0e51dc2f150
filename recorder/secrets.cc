#include "recorder/secrets.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>

namespace trace::recorder {
namespace {

// The words of a flag or variable name: "--hf_API-key" -> {"hf", "api", "key"}.
std::vector<std::string> NameWords(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

bool IsSecretName(std::string_view name) {
  static const std::set<std::string> kSecretWords = {
      "key",         "apikey",        "token",  "accesstoken", "authtoken",
      "secret",      "password",      "passwd", "passphrase",  "credential",
      "credentials", "authorization", "cookie", "sessionkey",  "privatekey"};
  // Names that point at a secret without holding it: --api-key-file, --token-path.
  static const std::set<std::string> kReferenceWords = {"file", "path",    "dir",  "env", "var",
                                                        "cmd",  "command", "name", "id"};
  std::vector<std::string> words = NameWords(name);
  // --no-token and friends are switches, not values.
  if (words.empty() || words.front() == "no" || kReferenceWords.count(words.back())) return false;
  for (const std::string& w : words) {
    if (kSecretWords.count(w)) return true;
  }
  return false;
}

// "Authorization: Bearer T", "Bearer T", "token T" inside one argument.
std::string RedactBearer(const std::string& arg) {
  std::string lower = arg;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view scheme : {"bearer ", "basic ", "token "}) {
    size_t at = lower.find(scheme);
    if (at == std::string::npos) continue;
    // Only as an authorization value: at the start, or after "authorization:".
    std::string_view before = std::string_view(lower).substr(0, at);
    while (!before.empty() && before.back() == ' ') before.remove_suffix(1);
    bool header = before.empty() ||
                  (before.size() >= 14 && before.substr(before.size() - 14) == "authorization:");
    if (!header) continue;
    size_t value = at + scheme.size();
    if (value >= arg.size()) continue;
    return arg.substr(0, value) + std::string(kRedacted);
  }
  return arg;
}

}  // namespace

bool IsSecretFlag(std::string_view flag) {
  if (flag.size() < 2 || flag[0] != '-') return false;
  while (!flag.empty() && flag[0] == '-') flag.remove_prefix(1);
  if (flag.size() < 2) return false;  // -p and friends are too ambiguous
  return IsSecretName(flag);
}

std::vector<std::string> RedactArgv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  bool redact_next = false;
  for (const std::string& raw : argv) {
    if (redact_next) {
      redact_next = false;
      if (raw.empty() || raw[0] != '-') {
        out.emplace_back(kRedacted);
        continue;
      }
    }
    std::string arg = StripUrlCredentials(raw);
    size_t eq = arg.find('=');
    if (!arg.empty() && arg[0] == '-') {
      std::string_view flag = std::string_view(arg).substr(0, eq);
      if (IsSecretFlag(flag)) {
        if (eq == std::string::npos) {
          redact_next = true;
        } else {
          arg = arg.substr(0, eq + 1) + std::string(kRedacted);
        }
      }
    } else if (eq != std::string::npos && eq > 0 &&
               IsSecretName(std::string_view(arg).substr(0, eq))) {
      // NAME=value, as `env OPENAI_API_KEY=sk-... agent` passes it.
      bool is_name = true;
      for (size_t i = 0; i < eq; ++i) {
        const char c = arg[i];
        is_name = is_name && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      }
      if (is_name) arg = arg.substr(0, eq + 1) + std::string(kRedacted);
    }
    out.push_back(RedactBearer(arg));
  }
  return out;
}

UrlWithoutCredentials SplitUrlCredentials(std::string_view url) {
  UrlWithoutCredentials out;
  out.url = std::string(url);
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return out;
  const size_t authority = scheme + 3;
  size_t end = url.find_first_of("/?#", authority);
  if (end == std::string_view::npos) end = url.size();
  size_t at = url.rfind('@', end);
  if (at == std::string_view::npos || at < authority) return out;
  std::string_view userinfo = url.substr(authority, at - authority);
  size_t colon = userinfo.find(':');
  out.user = std::string(userinfo.substr(0, colon));
  if (colon != std::string_view::npos) out.password = std::string(userinfo.substr(colon + 1));
  out.url = std::string(url.substr(0, authority)) + std::string(url.substr(at + 1));
  out.had_credentials = true;
  return out;
}

std::string StripUrlCredentials(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t scheme = text.find("://", pos);
    if (scheme == std::string_view::npos) break;
    // The URL runs from its scheme's start to the next whitespace or quote.
    size_t start = scheme;
    while (start > pos &&
           (std::isalnum(static_cast<unsigned char>(text[start - 1])) || text[start - 1] == '+' ||
            text[start - 1] == '-' || text[start - 1] == '.')) {
      --start;
    }
    size_t end = text.find_first_of(" \t\r\n\"'<>", scheme + 3);
    if (end == std::string_view::npos) end = text.size();
    out.append(text.substr(pos, start - pos));
    out.append(SplitUrlCredentials(text.substr(start, end - start)).url);
    pos = end;
  }
  out.append(text.substr(pos));
  return out;
}

Result<std::string> ResolveApiKey(const std::string& key_file) {
  if (!key_file.empty()) {
    std::ifstream in(key_file);
    if (!in) return InvalidArgument("cannot read the API key file '" + key_file + "'");
    std::string line;
    std::getline(in, line);
    size_t b = line.find_first_not_of(" \t\r\n");
    size_t e = line.find_last_not_of(" \t\r\n");
    if (b == std::string::npos) {
      return InvalidArgument("the API key file '" + key_file +
                             "' is empty (its first line is the key)");
    }
    return line.substr(b, e - b + 1);
  }
  if (const char* env = std::getenv("TRACE_API_KEY"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  return std::string();
}

}  // namespace trace::recorder
