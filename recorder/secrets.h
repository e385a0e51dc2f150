// Keeping secrets out of what a run records: the command lines (the agent's argv and the
// `trace` command line), the allow-listed environment and the upstream URL are stored in
// the run header, and `trace export` prints them. So before they are recorded:
//
//  - the value after a secret-looking flag (`--api-key K`, `--token=T`, `--hf_token T`,
//    `--password P`; not `--api-key-file PATH`, which names a secret without holding it),
//    the value of a secret-looking `NAME=value` argument (`OPENAI_API_KEY=sk-...`) and a
//    bearer token inside an argument (`-H "Authorization: Bearer T"`) become "[redacted]";
//  - credentials inside URLs (`https://user:pass@host/v1`) are removed.
//
// The server's own key is never taken from the command line (`ps` shows every process's
// argv to every user): ResolveApiKey reads it from a file or TRACE_API_KEY.
//
// Ownership: values. Thread safety: reentrant. Errors: ResolveApiKey names the file and
// what is wrong with it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trace::recorder {

inline constexpr std::string_view kRedacted = "[redacted]";

// Whether a flag ("--api-key", "-token", "--hf_token") names a secret value.
bool IsSecretFlag(std::string_view flag);
// `argv` as it may be recorded (see above).
std::vector<std::string> RedactArgv(const std::vector<std::string>& argv);

// `text` with the user:password@ part of every URL in it removed.
std::string StripUrlCredentials(std::string_view text);

// A URL split into the URL without credentials and the credentials.
struct UrlWithoutCredentials {
  std::string url;
  std::string user;
  std::string password;
  bool had_credentials = false;
};
UrlWithoutCredentials SplitUrlCredentials(std::string_view url);

// The server's API key: the first line of `key_file` when given (surrounding whitespace
// removed; an empty or unreadable file is an error), else $TRACE_API_KEY, else empty.
Result<std::string> ResolveApiKey(const std::string& key_file);

}  // namespace trace::recorder
