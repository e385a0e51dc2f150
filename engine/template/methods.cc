// Python's str, dict and list methods as chat templates call them (`s.strip()`,
// `d.items()`, `l.count(x)`), through jinja2's immutable sandbox: mutating methods are
// refused. One function per method, in one table per kind that also lists the methods
// Python has and this engine refuses or lacks (HasMethod, for access.cc). str.format is
// PyFormat here; the string algorithms are in py_string.cc.
#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>

#include "base/escape.h"
#include "engine/template/py_string.h"
#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

// ---- argument helpers ----------------------------------------------------------------

namespace {

Result<std::string> StrArg(const CallArgs& args, size_t index, std::string_view name,
                           const std::string& fn) {
  const Value* v = Arg(args, index, name);
  if (!v) return TypeError(fn + "() missing required argument " + Quote(std::string(name)));
  if (!v->is_string()) {
    return TypeError(fn + "() argument " + Quote(std::string(name)) + " must be str, not " +
                     KindName(*v));
  }
  return v->str();
}

// A Value per part, bounded as repetition bounds a list: splitting a 100 MB string of
// commas would otherwise take gigabytes.
Result<Value> StrList(const std::vector<std::string>& parts) {
  if (parts.size() > MaxBuiltSize() / sizeof(Value)) return TooLarge("list of split parts");
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::Str(p));
  return Value::MakeList(std::move(items));
}

// Converts a code-point index range of `s` into byte offsets (Python start/end args).
void CodePointRange(const std::string& s, const Value* start, const Value* end, size_t* b,
                    size_t* e) {
  auto cps = DecodeUtf8(s);
  int64_t n = static_cast<int64_t>(cps.size());
  auto norm = [&](const Value* v, int64_t dflt) {
    if (!v || v->is_none() || !v->is_integral()) return dflt;
    int64_t i = v->as_int();
    if (i < 0) i = std::max<int64_t>(0, i + n);
    return std::min(i, n);
  };
  int64_t cb = norm(start, 0), ce = norm(end, n);
  if (ce < cb) ce = cb;
  std::string prefix = EncodeUtf8(std::u32string_view(cps.data(), cb));
  *b = prefix.size();
  *e = *b + EncodeUtf8(std::u32string_view(cps.data() + cb, ce - cb)).size();
}

int64_t ByteToCodePoint(const std::string& s, size_t byte) {
  return static_cast<int64_t>(CodePointLength(s.substr(0, byte)));
}

Result<std::string> PyFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out.push_back('}');
      ++i;
      continue;
    }
    if (c == '}') return InvalidArgument("Single '}' encountered in format string");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      return InvalidArgument("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      return Unsupported("unsupported construct: format spec or conversion in str.format field '{" +
                         field + "}'");
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index < args.positional.size()) v = &args.positional[auto_index];
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t idx = 0;
      auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), idx);
      if (ec == std::errc() && idx < args.positional.size()) v = &args.positional[idx];
    } else {
      v = args.Keyword(field);
    }
    if (!v) return InvalidArgument("str.format: no value for field '{" + field + "}'");
    // "{0}" a million times over one long argument: each field may add that much.
    std::string piece = ToPyStr(*v);
    if (out.size() + piece.size() > MaxBuiltSize()) return TooLarge("str.format result");
    out += piece;
    i = close;
  }
  return out;
}

// ---- str methods -----------------------------------------------------------------------
//
// Each is a StrMethodFn: the string, the name it was called by (an alias's messages name the
// alias) and the arguments.

using StrMethodFn = Result<Value> (*)(const std::string& s, const std::string& name,
                                      CallArgs& args);

// "str.NAME", as Python's messages name the method.
std::string StrFn(const std::string& name) {
  return "str." + name;
}

Result<Value> StrUpper(const std::string& s, const std::string& name, CallArgs&) {
  return StrResult(PyUpper(s, StrFn(name) + " result"));
}

// lower, casefold.
Result<Value> StrLower(const std::string& s, const std::string& name, CallArgs&) {
  return StrResult(PyLower(s, StrFn(name) + " result"));
}

Result<Value> StrTitle(const std::string& s, const std::string& name, CallArgs&) {
  return StrResult(PyTitle(s, StrFn(name) + " result"));
}

Result<Value> StrCapitalize(const std::string& s, const std::string& name, CallArgs&) {
  return StrResult(PyCapitalize(s, StrFn(name) + " result"));
}

Result<Value> StrSwapcase(const std::string& s, const std::string& name, CallArgs&) {
  return StrResult(PySwapcase(s, StrFn(name) + " result"));
}

// strip, lstrip, rstrip: `chars` (default whitespace) off the chosen ends.
Result<Value> Strip(const std::string& s, const std::string& name, CallArgs& args, bool left,
                    bool right) {
  const Value* chars = Arg(args, 0, "chars");
  if (chars && !chars->is_none() && !chars->is_string()) {
    return TypeError(name + " arg must be None or str");
  }
  const std::string* set = (chars && chars->is_string()) ? &chars->str() : nullptr;
  return Value::Str(PyStrip(s, set, left, right));
}

Result<Value> StrStrip(const std::string& s, const std::string& name, CallArgs& args) {
  return Strip(s, name, args, true, true);
}

Result<Value> StrLstrip(const std::string& s, const std::string& name, CallArgs& args) {
  return Strip(s, name, args, true, false);
}

Result<Value> StrRstrip(const std::string& s, const std::string& name, CallArgs& args) {
  return Strip(s, name, args, false, true);
}

// startswith, endswith: `prefix` may be a tuple of candidates; start and end count code
// points.
Result<Value> HasAffix(const std::string& s, const std::string& name, CallArgs& args,
                       bool at_start) {
  const Value* prefix = Arg(args, 0, "prefix");
  if (!prefix) return TypeError(StrFn(name) + "() takes at least 1 argument (0 given)");
  size_t b, e;
  CodePointRange(s, Arg(args, 1, "start"), Arg(args, 2, "end"), &b, &e);
  std::string_view view(s.data() + b, e - b);
  std::vector<Value> one;
  if (!prefix->is_list()) one.push_back(*prefix);
  for (const auto& c : prefix->is_list() ? prefix->items() : one) {
    if (!c.is_string()) {
      return TypeError(StrFn(name) + " first arg must be str or a tuple of str, not " +
                       KindName(c));
    }
    if (at_start ? view.starts_with(c.str()) : view.ends_with(c.str())) return Value::Bool(true);
  }
  return Value::Bool(false);
}

Result<Value> StrStartswith(const std::string& s, const std::string& name, CallArgs& args) {
  return HasAffix(s, name, args, true);
}

Result<Value> StrEndswith(const std::string& s, const std::string& name, CallArgs& args) {
  return HasAffix(s, name, args, false);
}

// split and rsplit's `maxsplit` (-1: no limit).
int64_t MaxSplit(const CallArgs& args) {
  const Value* maxsplit = Arg(args, 1, "maxsplit");
  return (maxsplit && maxsplit->is_integral()) ? maxsplit->as_int() : -1;
}

// split and rsplit's separator (nullptr: runs of whitespace). The parts a separator makes are
// counted before splitting, so that they are not built (StrList checks the whitespace split
// and splitlines after, for want of a cheap count).
Result<const std::string*> SplitSeparator(const std::string& s, const CallArgs& args, int64_t max) {
  const Value* sep = Arg(args, 0, "sep");
  if (sep && !sep->is_none()) {
    if (!sep->is_string())
      return TypeError("must be str or None, not " + std::string(KindName(*sep)));
    if (sep->str().empty()) return InvalidArgument("empty separator");
  }
  const std::string* sep_str = (sep && sep->is_string()) ? &sep->str() : nullptr;
  if (sep_str) {
    uint64_t parts = 1;
    for (size_t p = s.find(*sep_str);
         p != std::string::npos && (max < 0 || parts <= static_cast<uint64_t>(max));
         p = s.find(*sep_str, p + sep_str->size())) {
      ++parts;
    }
    if (parts > MaxBuiltSize() / sizeof(Value)) return TooLarge("list of split parts");
  }
  return sep_str;
}

Result<Value> StrSplit(const std::string& s, const std::string&, CallArgs& args) {
  const int64_t max = MaxSplit(args);
  TRACE_ASSIGN_OR_RETURN(const std::string* sep, SplitSeparator(s, args, max));
  return StrList(PySplit(s, sep, max));
}

Result<Value> StrRsplit(const std::string& s, const std::string&, CallArgs& args) {
  int64_t max = MaxSplit(args);
  TRACE_ASSIGN_OR_RETURN(const std::string* sep, SplitSeparator(s, args, max));
  if (max < 0) return StrList(PySplit(s, sep, max));
  // rsplit with a limit: split from the right.
  if (!sep) return Unsupported("unsupported construct: str.rsplit(None, maxsplit)");
  std::vector<std::string> parts;
  std::string rest = s;
  while (max-- > 0) {
    size_t p = rest.rfind(*sep);
    if (p == std::string::npos) break;
    parts.insert(parts.begin(), rest.substr(p + sep->size()));
    rest.resize(p);
  }
  parts.insert(parts.begin(), rest);
  return StrList(parts);
}

Result<Value> StrSplitlines(const std::string& s, const std::string&, CallArgs& args) {
  const Value* keep = Arg(args, 0, "keepends");
  return StrList(PySplitLines(s, keep && keep->Truthy()));
}

Result<Value> StrReplace(const std::string& s, const std::string& name, CallArgs& args) {
  const std::string fn = StrFn(name);
  TRACE_ASSIGN_OR_RETURN(std::string old, StrArg(args, 0, "old", fn));
  TRACE_ASSIGN_OR_RETURN(std::string repl, StrArg(args, 1, "new", fn));
  const Value* count = Arg(args, 2, "count");
  const int64_t n = count && count->is_integral() ? count->as_int() : -1;
  // Each match may grow by the length of `new`: measured before it is built.
  if (PyReplaceSize(s, old, repl, n) > MaxBuiltSize()) return TooLarge(fn + " result");
  return Value::Str(PyReplace(s, old, repl, n));
}

// find, rfind, index, rindex and count's `sub`, and the part of `s` that start and end
// (code points) select: its first byte `b` and its bytes.
struct Search {
  std::string sub;
  size_t b = 0;
  std::string view;
};

Result<Search> SearchArgs(const std::string& s, const std::string& name, const CallArgs& args) {
  Search q;
  TRACE_ASSIGN_OR_RETURN(q.sub, StrArg(args, 0, "sub", StrFn(name)));
  size_t e;
  CodePointRange(s, Arg(args, 1, "start"), Arg(args, 2, "end"), &q.b, &e);
  q.view = s.substr(q.b, e - q.b);
  return q;
}

// find, rfind, index, rindex: the code-point index of the first (last) match; without one,
// -1, or an error for index and rindex.
Result<Value> Locate(const std::string& s, const std::string& name, CallArgs& args, bool from_right,
                     bool must_find) {
  TRACE_ASSIGN_OR_RETURN(Search q, SearchArgs(s, name, args));
  size_t p = from_right ? q.view.rfind(q.sub) : q.view.find(q.sub);
  if (p == std::string::npos) {
    if (must_find) return InvalidArgument("substring not found");
    return Value::Int(-1);
  }
  return Value::Int(ByteToCodePoint(s, q.b + p));
}

Result<Value> StrFind(const std::string& s, const std::string& name, CallArgs& args) {
  return Locate(s, name, args, false, false);
}

Result<Value> StrRfind(const std::string& s, const std::string& name, CallArgs& args) {
  return Locate(s, name, args, true, false);
}

Result<Value> StrIndex(const std::string& s, const std::string& name, CallArgs& args) {
  return Locate(s, name, args, false, true);
}

Result<Value> StrRindex(const std::string& s, const std::string& name, CallArgs& args) {
  return Locate(s, name, args, true, true);
}

Result<Value> StrCount(const std::string& s, const std::string& name, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(Search q, SearchArgs(s, name, args));
  if (q.sub.empty()) return Value::Int(static_cast<int64_t>(CodePointLength(q.view) + 1));
  int64_t n = 0;
  for (size_t p = q.view.find(q.sub); p != std::string::npos;
       p = q.view.find(q.sub, p + q.sub.size()))
    ++n;
  return Value::Int(n);
}

Result<Value> StrFormat(const std::string& s, const std::string&, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(std::string out, PyFormat(s, args));
  return Value::Str(out);
}

// What str.join joins: a list's items, a dict's keys, a string's characters.
Result<std::vector<Value>> JoinItems(const Value* it) {
  if (!it) return TypeError("str.join() takes exactly one argument (0 given)");
  std::vector<Value> items;
  if (it->is_list()) {
    items = it->items();
  } else if (it->is_dict()) {
    for (const auto& [k, v] : it->dict()->entries) items.push_back(Value::Str(k));
  } else if (it->is_string()) {
    // A Value per character, as ToList (builtins.cc) bounds it.
    if (CodePointLength(it->str()) > MaxBuiltSize() / sizeof(Value)) {
      return TooLarge("list of a string's characters");
    }
    for (char32_t c : DecodeUtf8(it->str())) {
      std::string one;
      AppendUtf8(one, c);
      items.push_back(Value::Str(one));
    }
  } else {
    return TypeError("can only join an iterable");
  }
  return items;
}

Result<Value> StrJoin(const std::string& s, const std::string& name, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, JoinItems(Arg(args, 0, "iterable")));
  // The separators alone: refused before anything is built.
  if (!items.empty() && !s.empty() && items.size() - 1 > MaxBuiltSize() / s.size()) {
    return TooLarge(StrFn(name) + " result");
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return TypeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                       KindName(items[i]) + " found");
    }
    // The items may be a million references to one long string.
    if (out.size() + (i ? s.size() : 0) + items[i].str().size() > MaxBuiltSize()) {
      return TooLarge(StrFn(name) + " result");
    }
    if (i) out += s;
    out += items[i].str();
  }
  return Value::Str(out);
}

Result<Value> StrRemoveprefix(const std::string& s, const std::string& name, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(std::string affix, StrArg(args, 0, "prefix", StrFn(name)));
  return Value::Str(s.rfind(affix, 0) == 0 ? s.substr(affix.size()) : s);
}

Result<Value> StrRemovesuffix(const std::string& s, const std::string& name, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(std::string affix, StrArg(args, 0, "prefix", StrFn(name)));
  bool ends =
      s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
  return Value::Str(ends && !affix.empty() ? s.substr(0, s.size() - affix.size()) : s);
}

// The str.isX() of a character class: `s` is not empty and every code point is in it.
Value AllCodePoints(const std::string& s, bool (*in_class)(char32_t)) {
  auto cps = DecodeUtf8(s);
  return Value::Bool(!cps.empty() && std::all_of(cps.begin(), cps.end(), in_class));
}

bool IsDecimalCp(char32_t c) {
  return utf8proc_category(c) == UTF8PROC_CATEGORY_ND;
}

bool IsNumericCp(char32_t c) {
  auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

// isdigit, isdecimal (both decimal digits here).
Result<Value> StrIsdecimal(const std::string& s, const std::string&, CallArgs&) {
  return AllCodePoints(s, IsDecimalCp);
}

Result<Value> StrIsnumeric(const std::string& s, const std::string&, CallArgs&) {
  return AllCodePoints(s, IsNumericCp);
}

Result<Value> StrIsalpha(const std::string& s, const std::string&, CallArgs&) {
  return AllCodePoints(s, IsAlphaCp);
}

Result<Value> StrIsalnum(const std::string& s, const std::string&, CallArgs&) {
  return AllCodePoints(s, IsAlnumCp);
}

Result<Value> StrIsspace(const std::string& s, const std::string&, CallArgs&) {
  return AllCodePoints(s, IsPyWhitespace);
}

Result<Value> StrIsascii(const std::string& s, const std::string&, CallArgs&) {
  auto cps = DecodeUtf8(s);
  return Value::Bool(std::all_of(cps.begin(), cps.end(), [](char32_t c) { return c < 0x80; }));
}

// islower, isupper: some cased character, and every cased one unchanged by `to_case`.
Value CasedAs(const std::string& s, char32_t (*to_case)(char32_t)) {
  bool any_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (!IsCased(c)) continue;
    any_cased = true;
    if (to_case(c) != c) return Value::Bool(false);
  }
  return Value::Bool(any_cased);
}

Result<Value> StrIslower(const std::string& s, const std::string&, CallArgs&) {
  return CasedAs(s, ToLower);
}

Result<Value> StrIsupper(const std::string& s, const std::string&, CallArgs&) {
  return CasedAs(s, ToUpper);
}

Result<Value> StrZfill(const std::string& s, const std::string& name, CallArgs& args) {
  const Value* w = Arg(args, 0, "width");
  if (!w || !w->is_integral()) return TypeError("str.zfill() needs an integer width");
  int64_t len = static_cast<int64_t>(CodePointLength(s));
  if (w->as_int() <= len) return Value::Str(s);
  if (w->as_int() > kMaxIndent) return WidthTooLarge(StrFn(name) + " width");
  if (s.size() + static_cast<size_t>(w->as_int() - len) > MaxBuiltSize()) {
    return TooLarge("zfill result");
  }
  std::string pad(static_cast<size_t>(w->as_int() - len), '0');
  if (!s.empty() && (s[0] == '+' || s[0] == '-'))
    return Value::Str(s.substr(0, 1) + pad + s.substr(1));
  return Value::Str(pad + s);
}

enum class Align { kLeft, kRight, kCenter };

// ljust, rjust, center: `s` padded with `fillchar` to `width` code points.
Result<Value> Pad(const std::string& s, const std::string& name, CallArgs& args, Align align) {
  const Value* w = Arg(args, 0, "width");
  if (!w || !w->is_integral()) return TypeError(StrFn(name) + "() needs an integer width");
  const Value* fill = Arg(args, 1, "fillchar");
  std::string f = fill && fill->is_string() ? fill->str() : " ";
  int64_t len = static_cast<int64_t>(CodePointLength(s));
  int64_t total = w->as_int() - len;
  if (total <= 0) return Value::Str(s);
  if (w->as_int() > kMaxIndent) return WidthTooLarge(StrFn(name) + " width");
  // The fill is repeated up to the width; Python refuses a fill longer than one character,
  // this accepts one, so the result is measured.
  if (s.size() + static_cast<uint64_t>(total) * f.size() > MaxBuiltSize()) {
    return TooLarge(StrFn(name) + " result");
  }
  int64_t left = align == Align::kLeft    ? 0
                 : align == Align::kRight ? total
                                          : total / 2 + (total & w->as_int() & 1);
  int64_t right = total - left;
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += f;
  out += s;
  for (int64_t i = 0; i < right; ++i) out += f;
  return Value::Str(out);
}

Result<Value> StrLjust(const std::string& s, const std::string& name, CallArgs& args) {
  return Pad(s, name, args, Align::kLeft);
}

Result<Value> StrRjust(const std::string& s, const std::string& name, CallArgs& args) {
  return Pad(s, name, args, Align::kRight);
}

Result<Value> StrCenter(const std::string& s, const std::string& name, CallArgs& args) {
  return Pad(s, name, args, Align::kCenter);
}

// A method Python's str has and this engine does not implement.
Result<Value> StrUnsupported(const std::string&, const std::string& name, CallArgs&) {
  return Unsupported("unsupported construct: str." + name + "()");
}

// Every method of Python's str, by name: the one list of them.
const NameTable<StrMethodFn>& StrMethods() {
  static const NameTable<StrMethodFn> kMethods = {
      {"capitalize", StrCapitalize},
      {"casefold", StrLower},
      {"center", StrCenter},
      {"count", StrCount},
      {"encode", StrUnsupported},
      {"endswith", StrEndswith},
      {"expandtabs", StrUnsupported},
      {"find", StrFind},
      {"format", StrFormat},
      {"format_map", StrUnsupported},
      {"index", StrIndex},
      {"isalnum", StrIsalnum},
      {"isalpha", StrIsalpha},
      {"isascii", StrIsascii},
      {"isdecimal", StrIsdecimal},
      {"isdigit", StrIsdecimal},
      {"isidentifier", StrUnsupported},
      {"islower", StrIslower},
      {"isnumeric", StrIsnumeric},
      {"isprintable", StrUnsupported},
      {"isspace", StrIsspace},
      {"istitle", StrUnsupported},
      {"isupper", StrIsupper},
      {"join", StrJoin},
      {"ljust", StrLjust},
      {"lower", StrLower},
      {"lstrip", StrLstrip},
      {"maketrans", StrUnsupported},
      {"partition", StrUnsupported},
      {"removeprefix", StrRemoveprefix},
      {"removesuffix", StrRemovesuffix},
      {"replace", StrReplace},
      {"rfind", StrRfind},
      {"rindex", StrRindex},
      {"rjust", StrRjust},
      {"rpartition", StrUnsupported},
      {"rsplit", StrRsplit},
      {"rstrip", StrRstrip},
      {"split", StrSplit},
      {"splitlines", StrSplitlines},
      {"startswith", StrStartswith},
      {"strip", StrStrip},
      {"swapcase", StrSwapcase},
      {"title", StrTitle},
      {"translate", StrUnsupported},
      {"upper", StrUpper},
      {"zfill", StrZfill},
  };
  return kMethods;
}

// ---- dict and list methods ---------------------------------------------------------------
//
// Each is an ObjectMethodFn: the dict or list, the name it was called by and the arguments.

using ObjectMethodFn = Result<Value> (*)(const Value& self, const std::string& name,
                                         CallArgs& args);

Result<Value> DictGet(const Value& self, const std::string&, CallArgs& args) {
  const Value* key = Arg(args, 0, "key");
  if (!key) return TypeError("get expected at least 1 argument, got 0");
  const Value* dflt = Arg(args, 1, "default");
  if (key->is_string()) {
    if (const Value* v = self.dict()->Find(key->str())) return *v;
  }
  return dflt ? *dflt : Value::None();
}

Result<Value> DictItems(const Value& self, const std::string&, CallArgs&) {
  return Value::MakeList(ItemPairs(self));
}

Result<Value> DictKeys(const Value& self, const std::string&, CallArgs&) {
  std::vector<Value> items;
  for (const auto& [k, v] : self.dict()->entries) items.push_back(Value::Str(k));
  return Value::MakeList(std::move(items));
}

Result<Value> DictValues(const Value& self, const std::string&, CallArgs&) {
  std::vector<Value> items;
  for (const auto& [k, v] : self.dict()->entries) items.push_back(v);
  return Value::MakeList(std::move(items));
}

Result<Value> DictCopy(const Value& self, const std::string&, CallArgs&) {
  return Value::MakeDict(std::make_shared<Dict>(*self.dict()));
}

// list.count and list.index's argument.
Result<const Value*> ListArg(const std::string& name, CallArgs& args) {
  const Value* x = Arg(args, 0, "value");
  if (!x) return TypeError("list." + name + "() takes exactly one argument (0 given)");
  return x;
}

Result<Value> ListCount(const Value& self, const std::string& name, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(const Value* x, ListArg(name, args));
  int64_t count = 0;
  for (const Value& item : self.items()) {
    if (PyEquals(item, *x)) ++count;
  }
  return Value::Int(count);
}

Result<Value> ListIndex(const Value& self, const std::string& name, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(const Value* x, ListArg(name, args));
  for (size_t i = 0; i < self.items().size(); ++i) {
    if (PyEquals(self.items()[i], *x)) return Value::Int(static_cast<int64_t>(i));
  }
  return InvalidArgument(EscapeForDisplay(ToPyRepr(*x)) + " is not in list");
}

Result<Value> ListCopy(const Value& self, const std::string&, CallArgs&) {
  return Value::MakeList(self.items(), self.is_tuple());
}

// A method that would change the value (or, for dict.fromkeys, make one): refused by
// transformers' ImmutableSandboxedEnvironment.
Result<Value> Unsafe(const Value& self, const std::string& name, CallArgs&) {
  return InvalidArgument("access to attribute " + Quote(name) + " of " + Quote(KindName(self)) +
                         " object is unsafe (immutable sandbox)");
}

// Every method of Python's dict and list, by name: the one list of each.
const NameTable<ObjectMethodFn>& DictMethods() {
  static const NameTable<ObjectMethodFn> kMethods = {
      {"clear", Unsafe},      {"copy", DictCopy}, {"fromkeys", Unsafe},   {"get", DictGet},
      {"items", DictItems},   {"keys", DictKeys}, {"pop", Unsafe},        {"popitem", Unsafe},
      {"setdefault", Unsafe}, {"update", Unsafe}, {"values", DictValues},
  };
  return kMethods;
}

const NameTable<ObjectMethodFn>& ListMethods() {
  static const NameTable<ObjectMethodFn> kMethods = {
      {"append", Unsafe}, {"clear", Unsafe},    {"copy", ListCopy}, {"count", ListCount},
      {"extend", Unsafe}, {"index", ListIndex}, {"insert", Unsafe}, {"pop", Unsafe},
      {"remove", Unsafe}, {"reverse", Unsafe},  {"sort", Unsafe},
  };
  return kMethods;
}

// The method `name` of a dict or list; Unsafe for any other.
ObjectMethodFn ObjectMethod(const Value& self, const std::string& name) {
  ObjectMethodFn fn = nullptr;
  if (self.is_dict()) fn = DictMethods().Find(name);
  if (self.is_list()) fn = ListMethods().Find(name);
  return fn ? fn : Unsafe;
}

}  // namespace

// ---- binding and calling ---------------------------------------------------------------

Result<Value> CallStrMethod(const std::string& s, const std::string& name, CallArgs& args) {
  StrMethodFn fn = StrMethods().Find(name);
  return (fn ? fn : StrUnsupported)(s, name, args);
}

bool HasMethod(Kind kind, std::string_view name) {
  switch (kind) {
    case Kind::kString:
      return StrMethods().Has(name);
    case Kind::kDict:
      return DictMethods().Has(name);
    case Kind::kList:
      return ListMethods().Has(name);
    default:
      return false;
  }
}

Value Renderer::BoundMethod(const Value& self, const std::string& name) {
  auto fn = std::make_shared<Callable>();
  fn->name = std::string(KindName(self)) + "." + name;
  if (self.is_string()) {
    fn->fn = [self, name](Renderer&, CallArgs& args) {
      return CallStrMethod(self.str(), name, args);
    };
  } else {
    fn->fn = [self, name, method = ObjectMethod(self, name)](Renderer&, CallArgs& args) {
      return method(self, name, args);
    };
  }
  return Value::MakeCallable(fn);
}

}  // namespace trace::engine::tmpl
