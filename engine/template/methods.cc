// Python's str, dict and list methods as chat templates call them (`s.strip()`,
// `d.items()`, `l.count(x)`), through jinja2's immutable sandbox: mutating methods are
// refused. str.format is PyFormat here; the string algorithms are in py_string.cc.
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

}  // namespace

// ---- methods ---------------------------------------------------------------------------

Result<Value> CallStrMethod(const std::string& s, const std::string& name, CallArgs& args) {
  const std::string fn = "str." + name;
  if (name == "upper") return StrResult(PyUpper(s, fn + " result"));
  if (name == "lower" || name == "casefold") return StrResult(PyLower(s, fn + " result"));
  if (name == "title") return StrResult(PyTitle(s, fn + " result"));
  if (name == "capitalize") return StrResult(PyCapitalize(s, fn + " result"));
  if (name == "swapcase") return StrResult(PySwapcase(s, fn + " result"));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = Arg(args, 0, "chars");
    if (chars && !chars->is_none() && !chars->is_string()) {
      return TypeError(name + " arg must be None or str");
    }
    const std::string* set = (chars && chars->is_string()) ? &chars->str() : nullptr;
    return Value::Str(PyStrip(s, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* prefix = Arg(args, 0, "prefix");
    if (!prefix) return TypeError(fn + "() takes at least 1 argument (0 given)");
    size_t b, e;
    CodePointRange(s, Arg(args, 1, "start"), Arg(args, 2, "end"), &b, &e);
    std::string_view view(s.data() + b, e - b);
    std::vector<Value> candidates =
        prefix->is_list() ? prefix->items() : std::vector<Value>{*prefix};
    for (const auto& c : candidates) {
      if (!c.is_string()) {
        return TypeError(fn + " first arg must be str or a tuple of str, not " + KindName(c));
      }
      bool hit = name == "startswith" ? view.substr(0, c.str().size()) == c.str()
                                      : (view.size() >= c.str().size() &&
                                         view.substr(view.size() - c.str().size()) == c.str());
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = Arg(args, 0, "sep");
    const Value* maxsplit = Arg(args, 1, "maxsplit");
    int64_t max = (maxsplit && maxsplit->is_integral()) ? maxsplit->as_int() : -1;
    if (sep && !sep->is_none()) {
      if (!sep->is_string())
        return TypeError("must be str or None, not " + std::string(KindName(*sep)));
      if (sep->str().empty()) return InvalidArgument("empty separator");
    }
    const std::string* sep_str = (sep && sep->is_string()) ? &sep->str() : nullptr;
    if (sep_str) {
      // Counted before splitting, so that the parts are not built (StrList checks the
      // whitespace split and splitlines after, for want of a cheap count).
      uint64_t parts = 1;
      for (size_t p = s.find(*sep_str);
           p != std::string::npos && (max < 0 || parts <= static_cast<uint64_t>(max));
           p = s.find(*sep_str, p + sep_str->size())) {
        ++parts;
      }
      if (parts > MaxBuiltSize() / sizeof(Value)) return TooLarge("list of split parts");
    }
    if (name == "rsplit" && max >= 0) {
      // rsplit with a limit: split from the right.
      if (!sep_str) return Unsupported("unsupported construct: str.rsplit(None, maxsplit)");
      std::vector<std::string> parts;
      std::string rest = s;
      while (max-- > 0) {
        size_t p = rest.rfind(*sep_str);
        if (p == std::string::npos) break;
        parts.insert(parts.begin(), rest.substr(p + sep_str->size()));
        rest.resize(p);
      }
      parts.insert(parts.begin(), rest);
      return StrList(parts);
    }
    return StrList(PySplit(s, sep_str, max));
  }
  if (name == "splitlines") {
    const Value* keep = Arg(args, 0, "keepends");
    return StrList(PySplitLines(s, keep && keep->Truthy()));
  }
  if (name == "replace") {
    TRACE_ASSIGN_OR_RETURN(std::string old, StrArg(args, 0, "old", fn));
    TRACE_ASSIGN_OR_RETURN(std::string repl, StrArg(args, 1, "new", fn));
    const Value* count = Arg(args, 2, "count");
    const int64_t n = count && count->is_integral() ? count->as_int() : -1;
    // Each match may grow by the length of `new`: measured before it is built.
    if (PyReplaceSize(s, old, repl, n) > MaxBuiltSize()) return TooLarge(fn + " result");
    return Value::Str(PyReplace(s, old, repl, n));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    TRACE_ASSIGN_OR_RETURN(std::string sub, StrArg(args, 0, "sub", fn));
    size_t b, e;
    CodePointRange(s, Arg(args, 1, "start"), Arg(args, 2, "end"), &b, &e);
    std::string view = s.substr(b, e - b);
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointLength(view) + 1));
      int64_t n = 0;
      for (size_t p = view.find(sub); p != std::string::npos; p = view.find(sub, p + sub.size()))
        ++n;
      return Value::Int(n);
    }
    size_t p = (name == "find" || name == "index") ? view.find(sub) : view.rfind(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") return InvalidArgument("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(ByteToCodePoint(s, b + p));
  }
  if (name == "format") {
    TRACE_ASSIGN_OR_RETURN(std::string out, PyFormat(s, args));
    return Value::Str(out);
  }
  if (name == "join") {
    const Value* it = Arg(args, 0, "iterable");
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
    // The separators alone: refused before anything is built.
    if (!items.empty() && !s.empty() && items.size() - 1 > MaxBuiltSize() / s.size()) {
      return TooLarge(fn + " result");
    }
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return TypeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                         KindName(items[i]) + " found");
      }
      // The items may be a million references to one long string.
      if (out.size() + (i ? s.size() : 0) + items[i].str().size() > MaxBuiltSize()) {
        return TooLarge(fn + " result");
      }
      if (i) out += s;
      out += items[i].str();
    }
    return Value::Str(out);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    TRACE_ASSIGN_OR_RETURN(std::string affix, StrArg(args, 0, "prefix", fn));
    if (name == "removeprefix") {
      return Value::Str(s.rfind(affix, 0) == 0 ? s.substr(affix.size()) : s);
    }
    bool ends =
        s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
    return Value::Str(ends && !affix.empty() ? s.substr(0, s.size() - affix.size()) : s);
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric" || name == "isalpha" ||
      name == "isalnum" || name == "isspace" || name == "islower" || name == "isupper" ||
      name == "isascii") {
    auto cps = DecodeUtf8(s);
    if (name == "isascii") {
      return Value::Bool(std::all_of(cps.begin(), cps.end(), [](char32_t c) { return c < 0x80; }));
    }
    if (cps.empty()) return Value::Bool(false);
    if (name == "islower" || name == "isupper") {
      bool any_cased = false;
      for (char32_t c : cps) {
        if (!IsCased(c)) continue;
        any_cased = true;
        if (name == "islower" ? ToLower(c) != c : ToUpper(c) != c) return Value::Bool(false);
      }
      return Value::Bool(any_cased);
    }
    for (char32_t c : cps) {
      bool ok;
      auto cat = utf8proc_category(c);
      if (name == "isspace") {
        ok = IsPyWhitespace(c);
      } else if (name == "isalpha") {
        ok = IsAlphaCp(c);
      } else if (name == "isalnum") {
        ok = IsAlnumCp(c);
      } else if (name == "isdecimal" || name == "isdigit") {
        ok = cat == UTF8PROC_CATEGORY_ND;
      } else {
        ok = cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
             cat == UTF8PROC_CATEGORY_NO;
      }
      if (!ok) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  if (name == "zfill") {
    const Value* w = Arg(args, 0, "width");
    if (!w || !w->is_integral()) return TypeError("str.zfill() needs an integer width");
    int64_t len = static_cast<int64_t>(CodePointLength(s));
    if (w->as_int() <= len) return Value::Str(s);
    if (w->as_int() > kMaxIndent) return WidthTooLarge(fn + " width");
    if (s.size() + static_cast<size_t>(w->as_int() - len) > MaxBuiltSize()) {
      return TooLarge("zfill result");
    }
    std::string pad(static_cast<size_t>(w->as_int() - len), '0');
    if (!s.empty() && (s[0] == '+' || s[0] == '-'))
      return Value::Str(s.substr(0, 1) + pad + s.substr(1));
    return Value::Str(pad + s);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    const Value* w = Arg(args, 0, "width");
    if (!w || !w->is_integral()) return TypeError(fn + "() needs an integer width");
    const Value* fill = Arg(args, 1, "fillchar");
    std::string f = fill && fill->is_string() ? fill->str() : " ";
    int64_t len = static_cast<int64_t>(CodePointLength(s));
    int64_t total = w->as_int() - len;
    if (total <= 0) return Value::Str(s);
    if (w->as_int() > kMaxIndent) return WidthTooLarge(fn + " width");
    // The fill is repeated up to the width; Python refuses a fill longer than one character,
    // this accepts one, so the result is measured.
    if (s.size() + static_cast<uint64_t>(total) * f.size() > MaxBuiltSize()) {
      return TooLarge(fn + " result");
    }
    int64_t left = name == "ljust"   ? 0
                   : name == "rjust" ? total
                                     : total / 2 + (total & w->as_int() & 1);
    int64_t right = total - left;
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += f;
    out += s;
    for (int64_t i = 0; i < right; ++i) out += f;
    return Value::Str(out);
  }
  return Unsupported("unsupported construct: str." + name + "()");
}

Value Renderer::BoundMethod(const Value& self, const std::string& name) {
  auto fn = std::make_shared<Callable>();
  fn->name = std::string(KindName(self)) + "." + name;
  fn->fn = [self, name](Renderer& r, CallArgs& args) -> Result<Value> {
    if (self.is_string()) return CallStrMethod(self.str(), name, args);
    if (self.is_dict()) {
      if (name == "get") {
        const Value* key = Arg(args, 0, "key");
        if (!key) return TypeError("get expected at least 1 argument, got 0");
        const Value* dflt = Arg(args, 1, "default");
        if (key->is_string()) {
          if (const Value* v = self.dict()->Find(key->str())) return *v;
        }
        return dflt ? *dflt : Value::None();
      }
      if (name == "items") {
        std::vector<Value> items;
        for (const auto& [k, v] : self.dict()->entries) {
          items.push_back(Value::MakeList({Value::Str(k), v}, true));
        }
        return Value::MakeList(std::move(items));
      }
      if (name == "keys" || name == "values") {
        std::vector<Value> items;
        for (const auto& [k, v] : self.dict()->entries) {
          items.push_back(name == "keys" ? Value::Str(k) : v);
        }
        return Value::MakeList(std::move(items));
      }
      if (name == "copy") {
        return Value::MakeDict(std::make_shared<Dict>(*self.dict()));
      }
    }
    if (self.is_list()) {
      if (name == "count" || name == "index") {
        const Value* x = Arg(args, 0, "value");
        if (!x) return TypeError("list." + name + "() takes exactly one argument (0 given)");
        int64_t count = 0;
        for (size_t i = 0; i < self.items().size(); ++i) {
          if (!PyEquals(self.items()[i], *x)) continue;
          if (name == "index") return Value::Int(static_cast<int64_t>(i));
          ++count;
        }
        if (name == "index") {
          return InvalidArgument(EscapeForDisplay(ToPyRepr(*x)) + " is not in list");
        }
        return Value::Int(count);
      }
      if (name == "copy") return Value::MakeList(self.items(), self.is_tuple());
    }
    (void)r;
    // Mutating methods are refused by transformers' ImmutableSandboxedEnvironment.
    return InvalidArgument("access to attribute " + Quote(name) + " of " + Quote(KindName(self)) +
                           " object is unsafe (immutable sandbox)");
  };
  return Value::MakeCallable(fn);
}

}  // namespace trace::engine::tmpl
