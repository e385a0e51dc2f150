// Redaction rules: what counts as a secret in a run before it leaves the machine
// (docs/export.md, "Redaction").
//
// A RuleSet is a list of named PCRE2 patterns (the built-in defaults, plus custom ones
// from a rules file) and named literal values (the values of environment variables whose
// names look secret). A pattern with a capture group named `secret` redacts only that
// group (`Bearer <secret>` keeps the word "Bearer"); otherwise the whole match.
//
// Ownership: a RuleSet owns plain strings; compile it with Redactor::Create
// (redact/redactor.h). Thread safety: none needed (build it on one thread, then read).
// Errors: AddPattern and AddRulesFile return InvalidArgument naming the file, line, rule
// and the PCRE2 message with the offset of a bad pattern; nothing throws.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trace::redact {

struct PatternRule {
  std::string name;     // "sk-api-key"; appears in "[REDACTED:sk-api-key]" and reports
  std::string pattern;  // PCRE2, compiled with UTF and invalid-UTF tolerance
};

struct LiteralRule {
  std::string name;   // "env:OPENAI_API_KEY"
  std::string value;  // replaced wherever it occurs, byte for byte
};

// Literal values shorter than this are ignored: "1", "true" or a short path would
// otherwise be redacted wherever they occur.
inline constexpr size_t kMinLiteralBytes = 8;

class RuleSet {
 public:
  // The built-in rules (docs/export.md lists them): bearer and basic credentials, API-key
  // shapes of the major providers, private key blocks, JWTs, passwords in URLs and
  // `password=...`-style assignments, and the run's own token (`trace-` + 32 hex digits,
  // the OPENAI_API_KEY that `trace record` hands the agent).
  static RuleSet Defaults();
  // No rules at all (tests, or a caller building its own set).
  static RuleSet Empty() { return RuleSet(); }

  // Adds a pattern after checking that it compiles. `name`: letters, digits, '.', '_',
  // '-', ':' (at most 64).
  Status AddPattern(std::string name, std::string pattern);
  // Reads custom patterns: one rule per line, `NAME REGEX` (the regex is the rest of the
  // line after the whitespace following NAME); blank lines and lines starting with '#'
  // are skipped. Errors name the file and line.
  Status AddRulesFile(const std::string& path);
  // Adds a literal secret (ignored when shorter than kMinLiteralBytes, or all digits).
  void AddLiteral(std::string name, std::string value);
  // Adds, as literals named "env:NAME", the values of the environment entries ("NAME=VALUE")
  // whose names look secret (NameLooksSecret).
  void AddSecretEnvironment(char** envp);

  // True for names such as OPENAI_API_KEY, GITHUB_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY,
  // MY_CREDENTIALS: a '_'/'-'/'.'-separated segment is KEY, APIKEY, TOKEN, SECRET,
  // PASSWORD, PASSWD, PASS, PAT or CREDENTIAL(S), or the name ends in KEY, TOKEN, SECRET or
  // PASSWORD (case-insensitive).
  static bool NameLooksSecret(std::string_view name);

  const std::vector<PatternRule>& patterns() const { return patterns_; }
  const std::vector<LiteralRule>& literals() const { return literals_; }

 private:
  std::vector<PatternRule> patterns_;
  std::vector<LiteralRule> literals_;
};

}  // namespace trace::redact
