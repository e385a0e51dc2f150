// Hostile text for the error-path tests, and the check every message must pass.
//
// Ownership: values. Thread safety: pure functions. Errors: gtest failures.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trace::testing {

// Valid UTF-8 (so it can travel inside JSON) that a terminal would act on: a newline, a
// carriage return, ESC sequences that recolour and retitle, BEL, DEL, a C1 control, a line
// separator and a bidi override; then 3000 bytes, more than any message should quote.
inline std::string HostileText() {
  return "evil\n\r\t\x1b[31mRED\x1b]0;title\x07\x7f\xc2\x85\xe2\x80\xa8\xe2\x80\xae" +
         std::string(3000, 'z');
}
// The same with bytes that are not UTF-8, for inputs that are raw bytes.
inline std::string HostileBytes() {
  return "bad\xff\xfe\xc0\xaf" + HostileText();
}

// Part of HostileText once escaped: what every message quoting it holds. (Not the
// newlines: a template, like jinja2, reads "\r" as a newline.)
inline constexpr std::string_view kEscapedStart = "\\x1b[31mRED\\x1b]0;title\\x07";

// One line: no C0/DEL byte, valid UTF-8, none of the hidden controls escaped by
// EscapeForDisplay; and at most `max_bytes` long (values in messages are clipped).
// Checked byte by byte here rather than with the code under test.
inline ::testing::AssertionResult IsOneSafeLine(const std::string& message,
                                                size_t max_bytes = 1024) {
  if (message.empty()) return ::testing::AssertionFailure() << "empty message";
  if (message.size() > max_bytes) {
    return ::testing::AssertionFailure() << message.size() << " bytes: " << message.substr(0, 200);
  }
  for (size_t i = 0; i < message.size();) {
    const auto c = static_cast<unsigned char>(message[i]);
    if (c < 0x20 || c == 0x7f) {
      return ::testing::AssertionFailure() << "control byte " << int{c} << " at " << i;
    }
    const int n = c < 0x80                ? 0
                  : c >= 0xc2 && c < 0xe0 ? 1
                  : c >= 0xe0 && c < 0xf0 ? 2
                  : c >= 0xf0 && c < 0xf5 ? 3
                                          : -1;
    if (n < 0 || i + n >= message.size() + (n == 0 ? 1 : 0)) {
      return ::testing::AssertionFailure() << "invalid UTF-8 at " << i;
    }
    uint32_t cp = n == 0 ? c : c & (0x3f >> n);
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(message[i + k]);
      if ((d & 0xc0) != 0x80) return ::testing::AssertionFailure() << "invalid UTF-8 at " << i;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x061c ||
        cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069)) {
      char name[16];
      std::snprintf(name, sizeof name, "U+%04X", static_cast<unsigned>(cp));
      return ::testing::AssertionFailure() << "hidden control " << name;
    }
    i += n + 1;
  }
  return ::testing::AssertionSuccess();
}

// Text for a terminal: lines (split at '\n', empty ones allowed), each one safe as above and
// at most `max_line` bytes.
inline ::testing::AssertionResult IsSafeTerminalText(const std::string& text,
                                                     size_t max_line = 1 << 20) {
  size_t start = 0;
  int line = 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) {
      const std::string l = text.substr(start, end - start);
      ::testing::AssertionResult r = IsOneSafeLine(l, max_line);
      if (!r) return ::testing::AssertionFailure() << "line " << line << ": " << r.message();
    }
    start = end + 1;
    ++line;
  }
  return ::testing::AssertionSuccess();
}

// Every (pointer, document) that differs from `doc` by one node replaced with the hostile
// text or one object key renamed to it; `pointer` names the change ("/messages/0/role",
// "/messages/0/role#key" for a renamed key).
inline std::vector<std::pair<std::string, nlohmann::ordered_json>> HostileVariants(
    const nlohmann::ordered_json& doc) {
  using ojson = nlohmann::ordered_json;
  std::vector<ojson::json_pointer> nodes;
  std::function<void(const ojson&, const ojson::json_pointer&)> collect =
      [&](const ojson& j, const ojson::json_pointer& at) {
        if (j.is_object()) {
          for (auto it = j.begin(); it != j.end(); ++it) {
            nodes.push_back(at / it.key());
            collect(it.value(), at / it.key());
          }
        } else if (j.is_array()) {
          for (size_t i = 0; i < j.size(); ++i) {
            nodes.push_back(at / i);
            collect(j[i], at / i);
          }
        }
      };
  collect(doc, ojson::json_pointer());
  std::vector<std::pair<std::string, ojson>> out;
  for (const auto& p : nodes) {
    ojson replaced = doc;
    replaced[p] = HostileText();
    out.emplace_back(p.to_string(), replaced);
    if (doc[p.parent_pointer()].is_object()) {
      ojson renamed = doc;
      ojson& obj = renamed[p.parent_pointer()];
      ojson value = obj[p.back()];
      obj.erase(p.back());
      obj[HostileText()] = value;
      out.emplace_back(p.to_string() + "#key", renamed);
    }
  }
  return out;
}

}  // namespace trace::testing
