// Python's str operations on UTF-8 strings, as the template's methods (methods.cc) and
// filters (builtins.cc) need them: Python indexes and classifies code points, not bytes.
// Private to engine/template/; the UTF-8 codec and strip are in template_internal.h.
//
// Ownership: plain functions of their arguments; results are new strings. Thread safety:
// pure but for MaxBuiltSize(), which is per thread. Errors: invalid UTF-8 is decoded as
// DecodeUtf8 decodes it; the case mappings fail with TooLarge(what) (renderer.h) when their
// result would pass MaxBuiltSize() (an invalid byte becomes U+FFFD, three bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace trace::engine::tmpl {

// Unicode simple case mapping and character classes (utf8proc).
char32_t ToUpper(char32_t c);
char32_t ToLower(char32_t c);
bool IsCased(char32_t c);
bool IsAlnumCp(char32_t c);  // str.isalnum: letters and numbers
bool IsAlphaCp(char32_t c);  // str.isalpha: letters

Result<std::string> PyUpper(const std::string& s, const std::string& what);
Result<std::string> PyLower(const std::string& s, const std::string& what);
Result<std::string> PySwapcase(const std::string& s, const std::string& what);
Result<std::string> PyCapitalize(const std::string& s, const std::string& what);
// str.title(): a cased character after an uncased one is titlecased, others lowercased.
Result<std::string> PyTitle(const std::string& s, const std::string& what);
// jinja2's `title` filter: the first character of each run after [-\s({[<] uppercased, the
// rest lowercased.
Result<std::string> JinjaTitle(const std::string& s, const std::string& what);
// -1, 0 or 1 as PyLower(a) compares with PyLower(b) (code point order), without building
// either.
int CompareLowered(const std::string& a, const std::string& b);

// len(s): code points.
size_t CodePointLength(const std::string& s);
// Python str.split(sep=None, maxsplit=-1); `sep` nullptr splits on whitespace runs.
std::vector<std::string> PySplit(const std::string& s, const std::string* sep, int64_t maxsplit);
// str.replace(old, repl, count); count < 0 replaces all.
std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl,
                      int64_t count);
// The size in bytes of PyReplace(s, old, repl, count), found without building it.
size_t PyReplaceSize(const std::string& s, const std::string& old, const std::string& repl,
                     int64_t count);
// str.splitlines(keepends) with Python's line boundaries (\r\n, \x0b, \x1c, \u2028, ...).
std::vector<std::string> PySplitLines(const std::string& s, bool keepends);

}  // namespace trace::engine::tmpl
