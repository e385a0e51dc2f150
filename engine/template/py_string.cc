// Python's str operations on UTF-8 strings: case mapping and character classes by
// utf8proc's Unicode tables, split / splitlines / replace with CPython's rules.
#include "engine/template/py_string.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>

#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

namespace {

char32_t ToTitle(char32_t c) {
  return static_cast<char32_t>(utf8proc_totitle(c));
}

// Maps each code point of `s` through `map(c)` (which may keep state), checking the result
// against MaxBuiltSize() as it grows: an invalid byte decodes to U+FFFD, three bytes, so a
// case mapping can triple a string's size, and a value at the bound would pass it threefold.
template <typename Map>
Result<std::string> MapEachChar(const std::string& s, const std::string& what, Map map) {
  const size_t limit = MaxBuiltSize();
  std::string out;
  out.reserve(std::min(s.size(), limit));
  for (size_t i = 0; i < s.size();) {
    AppendUtf8(out, map(NextCodePoint(s, &i)));
    if (out.size() > limit) return TooLarge(what);
  }
  return out;
}

}  // namespace

char32_t ToUpper(char32_t c) {
  return static_cast<char32_t>(utf8proc_toupper(c));
}
char32_t ToLower(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(c));
}
bool IsCased(char32_t c) {
  return ToUpper(c) != c || ToLower(c) != c || ToTitle(c) != c;
}
bool IsAlnumCp(char32_t c) {
  auto cat = utf8proc_category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}
bool IsAlphaCp(char32_t c) {
  auto cat = utf8proc_category(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}

Result<std::string> PyUpper(const std::string& s, const std::string& what) {
  return MapEachChar(s, what, ToUpper);
}
Result<std::string> PyLower(const std::string& s, const std::string& what) {
  return MapEachChar(s, what, ToLower);
}
Result<std::string> PySwapcase(const std::string& s, const std::string& what) {
  return MapEachChar(s, what, [](char32_t c) { return ToUpper(c) != c ? ToUpper(c) : ToLower(c); });
}

Result<std::string> PyCapitalize(const std::string& s, const std::string& what) {
  bool first = true;
  return MapEachChar(s, what, [&first](char32_t c) {
    const char32_t mapped = first ? ToTitle(c) : ToLower(c);
    first = false;
    return mapped;
  });
}

Result<std::string> PyTitle(const std::string& s, const std::string& what) {
  bool prev_cased = false;
  return MapEachChar(s, what, [&prev_cased](char32_t c) {
    const char32_t mapped = prev_cased ? ToLower(c) : ToTitle(c);
    prev_cased = IsCased(c);
    return mapped;
  });
}

Result<std::string> JinjaTitle(const std::string& s, const std::string& what) {
  bool at_start = true;
  return MapEachChar(s, what, [&at_start](char32_t c) {
    if (c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPyWhitespace(c)) {
      at_start = true;
      return c;
    }
    const char32_t mapped = at_start ? ToUpper(c) : ToLower(c);
    at_start = false;
    return mapped;
  });
}

int CompareLowered(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const char32_t x = ToLower(NextCodePoint(a, &i)), y = ToLower(NextCodePoint(b, &j));
    if (x != y) return x < y ? -1 : 1;
  }
  return i < a.size() ? 1 : j < b.size() ? -1 : 0;
}

// Counted as DecodeUtf8 decodes, invalid bytes included: the size checks that rely on it
// (a list of a string's characters, replace('') of a string) must see what will be built.
// Counting lead bytes instead called a string of continuation bytes empty, and
// `('\x98' * 1000000).replace('', 'b' * 2000)` passed its 8 MiB check and built 2 GB.
size_t CodePointLength(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) NextCodePoint(s, &i);
  return n;
}

// Python str.split(sep=None, maxsplit=-1).
std::vector<std::string> PySplit(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit != 0) {
      size_t p = s.find(*sep, start);
      if (p == std::string::npos) break;
      out.push_back(s.substr(start, p - start));
      start = p + sep->size();
      if (maxsplit > 0) --maxsplit;
    }
    out.push_back(s.substr(start));
    return out;
  }
  auto cps = DecodeUtf8(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && IsPyWhitespace(cps[i])) ++i;
    if (i >= cps.size()) break;
    if (maxsplit == 0) {
      // The rest, with trailing whitespace stripped.
      size_t e = cps.size();
      while (e > i && IsPyWhitespace(cps[e - 1])) --e;
      out.push_back(EncodeUtf8(std::u32string_view(cps.data() + i, e - i)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsPyWhitespace(cps[j])) ++j;
    out.push_back(EncodeUtf8(std::u32string_view(cps.data() + i, j - i)));
    if (maxsplit > 0) --maxsplit;
    i = j;
  }
  return out;
}

std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    auto cps = DecodeUtf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cps.size()) AppendUtf8(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += repl;
    start = p + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

size_t PyReplaceSize(const std::string& s, const std::string& old, const std::string& repl,
                     int64_t count) {
  // An empty `old` matches before every code point and at the end.
  uint64_t matches = 0;
  if (old.empty()) {
    // PyReplace re-encodes every code point (an invalid byte becomes U+FFFD, 3 bytes).
    uint64_t encoded = 0;
    for (size_t i = 0; i < s.size(); ++matches) encoded += Utf8Length(NextCodePoint(s, &i));
    ++matches;  // and one at the end
    if (count >= 0) matches = std::min<uint64_t>(matches, static_cast<uint64_t>(count));
    return encoded + matches * repl.size();
  }
  for (size_t p = s.find(old);
       p != std::string::npos && (count < 0 || matches < static_cast<uint64_t>(count));
       p = s.find(old, p + old.size())) {
    ++matches;
  }
  return s.size() - matches * old.size() + matches * repl.size();
}

std::vector<std::string> PySplitLines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  auto cps = DecodeUtf8(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
               c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    out.push_back(
        EncodeUtf8(std::u32string_view(cps.data() + start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size())
    out.push_back(EncodeUtf8(std::u32string_view(cps.data() + start, cps.size() - start)));
  return out;
}

}  // namespace trace::engine::tmpl
