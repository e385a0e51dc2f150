// jinja2's builtins as chat templates use them: the filters (filters.py), the tests
// (tests.py) and the globals (range, namespace, dict, and transformers' raise_exception
// and strftime_now).
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>

#include "base/escape.h"
#include "engine/template/py_string.h"
#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

// ---- globals -----------------------------------------------------------------------------

Value Renderer::Builtin(const std::string& name) const {
  static const std::map<std::string, std::function<Result<Value>(Renderer&, CallArgs&)>> kFns = {
      {"range",
       [](Renderer&, CallArgs& a) -> Result<Value> {
         std::vector<int64_t> p;
         for (const auto& v : a.positional) {
           if (!v.is_integral()) {
             return TypeError(Quote(KindName(v)) + " object cannot be interpreted as an integer");
           }
           p.push_back(v.as_int());
         }
         if (p.empty() || p.size() > 3) return TypeError("range expected 1 to 3 arguments");
         int64_t start = p.size() == 1 ? 0 : p[0];
         int64_t stop = p.size() == 1 ? p[0] : p[1];
         int64_t step = p.size() == 3 ? p[2] : 1;
         if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
         std::vector<Value> items;
         for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
           if (items.size() >= 100000) {
             return InvalidArgument(
                 "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
           }
           items.push_back(Value::Int(i));
         }
         return Value::MakeList(std::move(items));
       }},
      {"namespace",
       [](Renderer& r, CallArgs& a) -> Result<Value> {
         auto d = std::make_shared<Dict>();
         r.TrackNamespace(d);
         for (const auto& v : a.positional) {
           if (!v.is_dict()) return TypeError("namespace() positional argument must be a dict");
           for (const auto& [k, x] : v.dict()->entries) d->Set(k, x);
         }
         for (const auto& [k, v] : a.keyword) d->Set(k, v);
         return Value::MakeNamespace(d);
       }},
      {"dict",
       [](Renderer&, CallArgs& a) -> Result<Value> {
         auto d = std::make_shared<Dict>();
         for (const auto& v : a.positional) {
           if (!v.is_dict()) return TypeError("dict() positional argument must be a dict");
           for (const auto& [k, x] : v.dict()->entries) d->Set(k, x);
         }
         for (const auto& [k, v] : a.keyword) d->Set(k, v);
         return Value::MakeDict(d);
       }},
      {"raise_exception",
       [](Renderer&, CallArgs& a) -> Result<Value> {
         const Value* m = Arg(a, 0, "message");
         // The template's own message for the user: longer than a value, still bounded.
         return FailedPrecondition("raise_exception: " +
                                   (m ? EscapeForDisplay(ToPyStr(*m), 4 * kDisplayLimit) : ""));
       }},
      {"strftime_now",
       [](Renderer&, CallArgs& a) -> Result<Value> {
         const Value* f = Arg(a, 0, "format");
         if (!f || !f->is_string()) return TypeError("strftime_now() needs a format string");
         std::time_t now = std::time(nullptr);
         std::tm tm{};
         localtime_r(&now, &tm);
         char buf[512];
         size_t n = std::strftime(buf, sizeof(buf), f->str().c_str(), &tm);
         return Value::Str(std::string(buf, n));
       }},
  };
  auto it = kFns.find(name);
  if (it == kFns.end()) return Value();
  auto fn = std::make_shared<Callable>();
  fn->name = name;
  fn->fn = it->second;
  return Value::MakeCallable(fn);
}

// ---- filters -------------------------------------------------------------------------------

namespace {

bool IsNoneOrMissing(const Value* v) {
  return !v || v->is_none();
}

// jinja2's make_attrgetter: "a.b.0" walks items with getitem semantics.
Result<Value> GetPath(Renderer& r, const Value& item, const std::string& path);

Result<int> SortCompare(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) {
    return CompareLowered(a.str(), b.str());
  }
  if (a.is_number() && b.is_number()) {
    double x = a.as_double(), y = b.as_double();
    if (a.is_integral() && b.is_integral())
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    for (size_t i = 0; i < a.items().size() && i < b.items().size(); ++i) {
      TRACE_ASSIGN_OR_RETURN(int c, SortCompare(a.items()[i], b.items()[i], case_sensitive));
      if (c != 0) return c;
    }
    return a.items().size() < b.items().size() ? -1 : a.items().size() > b.items().size() ? 1 : 0;
  }
  return TypeError("'<' not supported between instances of " + Quote(KindName(a)) + " and " +
                   Quote(KindName(b)));
}

// Up to five bytes a byte, and escaping an escaped string again grows it again (`&` to
// `&amp;` to `&amp;amp;`): measured before it is built.
Result<std::string> HtmlEscape(const std::string& s) {
  size_t size = s.size();
  for (char c : s) {
    if (c == '&' || c == '"' || c == '\'') size += 4;
    if (c == '<' || c == '>') size += 3;
  }
  if (size > MaxBuiltSize()) return TooLarge("escape result");
  std::string out;
  out.reserve(size);
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

double PyRound(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits == 0) return std::nearbyint(x);  // round-half-even, as Python's round()
  if (ndigits > 0) {
    // Python rounds the exact binary value correctly; "%.*f" does the same in glibc.
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(ndigits, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double p = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / p) * p;
}

}  // namespace

Result<std::vector<Value>> ToList(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return std::vector<Value>{};
    case Kind::kList:
      return v.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict()->entries) keys.push_back(Value::Str(k));
      return keys;
    }
    case Kind::kString: {
      // A Value per character: a 100 MB string would take gigabytes. Measured as
      // repetition measures a list.
      if (CodePointLength(v.str()) > MaxBuiltSize() / sizeof(Value)) {
        return TooLarge("list of a string's characters");
      }
      std::vector<Value> chars;
      for (char32_t c : DecodeUtf8(v.str())) {
        std::string one;
        AppendUtf8(one, c);
        chars.push_back(Value::Str(one));
      }
      return chars;
    }
    default:
      return TypeError(Quote(KindName(v)) + " object is not iterable");
  }
}

Result<Value> Renderer::ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
  auto need_str = [&](const Value& x) { return ToPyStr(x); };  // jinja2's soft_str
  if (name == "tojson") {
    // transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
    // sort_keys=False)
    const Value* ensure_ascii = Arg(args, 0, "ensure_ascii");
    const Value* indent = Arg(args, 1, "indent");
    const Value* separators = Arg(args, 2, "separators");
    const Value* sort_keys = Arg(args, 3, "sort_keys");
    std::optional<std::string> ind;
    if (!IsNoneOrMissing(indent)) {
      if (indent->is_integral()) {
        if (indent->as_int() > kMaxIndent) return WidthTooLarge("tojson indent");
        ind = std::string(static_cast<size_t>(std::max<int64_t>(0, indent->as_int())), ' ');
      } else if (indent->is_string()) {
        // Repeated once per nesting level on every line, as an int indent is.
        if (indent->str().size() > static_cast<size_t>(kMaxIndent)) {
          return WidthTooLarge("tojson indent");
        }
        ind = indent->str();
      } else {
        return TypeError("tojson: indent must be an int, a string or None");
      }
    }
    std::string item_sep = ind ? "," : ", ", key_sep = ": ";
    if (!IsNoneOrMissing(separators)) {
      if (!separators->is_list() || separators->items().size() != 2 ||
          !separators->items()[0].is_string() || !separators->items()[1].is_string()) {
        return TypeError("tojson: separators must be a pair of strings");
      }
      item_sep = separators->items()[0].str();
      key_sep = separators->items()[1].str();
    }
    if (v.is_undefined()) return TypeError("Object of type Undefined is not JSON serializable");
    TRACE_ASSIGN_OR_RETURN(std::string out,
                           ToJson(v, ind, item_sep, key_sep, sort_keys && sort_keys->Truthy(),
                                  ensure_ascii && ensure_ascii->Truthy()));
    return Value::Str(out);
  }
  if (name == "safe") return v;
  if (name == "string") {
    std::string s = need_str(v);
    if (s.size() > MaxBuiltSize()) return TooLarge("string result");  // see ToPyStr
    return Value::Str(std::move(s));
  }
  if (name == "e" || name == "escape" || name == "forceescape") {
    TRACE_ASSIGN_OR_RETURN(std::string escaped, HtmlEscape(need_str(v)));
    return Value::Str(std::move(escaped));
  }
  if (name == "trim") {
    const Value* chars = Arg(args, 0, "chars");
    const std::string* set = (chars && chars->is_string()) ? &chars->str() : nullptr;
    return Value::Str(PyStrip(need_str(v), set, true, true));
  }
  if (name == "upper") return StrResult(PyUpper(need_str(v), "upper result"));
  if (name == "lower") return StrResult(PyLower(need_str(v), "lower result"));
  if (name == "capitalize") return StrResult(PyCapitalize(need_str(v), "capitalize result"));
  if (name == "title") return StrResult(JinjaTitle(need_str(v), "title result"));
  if (name == "length" || name == "count") {
    switch (v.kind()) {
      case Kind::kUndefined:
        return Value::Int(0);
      case Kind::kString:
        return Value::Int(static_cast<int64_t>(CodePointLength(v.str())));
      case Kind::kList:
        return Value::Int(static_cast<int64_t>(v.items().size()));
      case Kind::kDict:
        return Value::Int(static_cast<int64_t>(v.dict()->entries.size()));
      default:
        return TypeError("object of type " + Quote(KindName(v)) + " has no len()");
    }
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : DecodeUtf8(need_str(v))) {
      bool w = c == '_' || IsAlnumCp(c);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::Int(n);
  }
  if (name == "default" || name == "d") {
    const Value* dflt = Arg(args, 0, "default_value");
    const Value* boolean = Arg(args, 1, "boolean");
    bool use = v.is_undefined() || (boolean && boolean->Truthy() && !v.Truthy());
    if (use) return dflt ? *dflt : Value::Str("");
    return v;
  }
  if (name == "list") {
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    return Value::MakeList(std::move(items));
  }
  if (name == "first" || name == "last") {
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = DecodeUtf8(v.str());
      std::reverse(cps.begin(), cps.end());
      return Value::Str(EncodeUtf8(std::u32string_view(cps.data(), cps.size())));
    }
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "join") {
    const Value* sep = Arg(args, 0, "d");
    const Value* attribute = Arg(args, 1, "attribute");
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    std::string out, d = sep ? need_str(*sep) : "";
    // The separators alone: refused before anything is built.
    if (!items.empty() && d.size() > 0 && items.size() - 1 > MaxBuiltSize() / d.size()) {
      return TooLarge("join result");
    }
    for (size_t i = 0; i < items.size(); ++i) {
      std::string piece;
      if (!IsNoneOrMissing(attribute)) {
        TRACE_ASSIGN_OR_RETURN(Value x, GetPath(*this, items[i], need_str(*attribute)));
        piece = need_str(x);
      } else {
        piece = need_str(items[i]);
      }
      // The items may be a million references to one long string.
      if (out.size() + (i ? d.size() : 0) + piece.size() > MaxBuiltSize()) {
        return TooLarge("join result");
      }
      if (i) out += d;
      out += piece;
    }
    return Value::Str(out);
  }
  if (name == "replace") {
    const Value* old = Arg(args, 0, "old");
    const Value* repl = Arg(args, 1, "new");
    const Value* count = Arg(args, 2, "count");
    if (!old || !repl) return TypeError("replace filter needs old and new");
    std::string s = need_str(v), o = need_str(*old), r = need_str(*repl);
    const int64_t n = IsNoneOrMissing(count) ? -1 : count->as_int();
    // Each match may grow by the length of `new`: measured before it is built.
    if (PyReplaceSize(s, o, r, n) > MaxBuiltSize()) return TooLarge("replace result");
    return Value::Str(PyReplace(s, o, r, n));
  }
  if (name == "indent") {
    const Value* width = Arg(args, 0, "width");
    const Value* first = Arg(args, 1, "first");
    const Value* blank = Arg(args, 2, "blank");
    // Checked before the spaces are built: `indent(6553785477580703)` asked for 6.5 PB
    // (template_fuzz).
    if (width && width->is_integral() && width->as_int() > kMaxIndent) {
      return WidthTooLarge("indent width");
    }
    std::string indention =
        width && width->is_string()
            ? width->str()
            : std::string(width && width->is_integral()
                              ? static_cast<size_t>(std::max<int64_t>(0, width->as_int()))
                              : 4,
                          ' ');
    if (indention.size() > static_cast<size_t>(kMaxIndent)) return WidthTooLarge("indent width");
    std::string s = need_str(v) + "\n";
    auto lines = PySplitLines(s, false);
    // Every line but the first gains the indent (and the first too with first=True).
    if (s.size() + lines.size() * indention.size() > MaxBuiltSize()) {
      return TooLarge("indent result");
    }
    std::string rv;
    if (blank && blank->Truthy()) {
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i) rv += "\n" + indention;
        rv += lines[i];
      }
    } else {
      rv = lines.empty() ? "" : lines[0];
      if (lines.size() > 1) {
        rv += "\n";
        for (size_t i = 1; i < lines.size(); ++i) {
          if (i > 1) rv += "\n";
          rv += lines[i].empty() ? lines[i] : indention + lines[i];
        }
      }
    }
    if (first && first->Truthy()) rv = indention + rv;
    return Value::Str(rv);
  }
  if (name == "int") {
    const Value* dflt = Arg(args, 0, "default");
    Value fallback = dflt ? *dflt : Value::Int(0);
    if (v.is_integral()) return Value::Int(v.as_int());
    if (v.kind() == Kind::kFloat) {
      if (!std::isfinite(v.as_double())) return fallback;
      return Value::Int(static_cast<int64_t>(v.as_double()));
    }
    if (v.is_string()) {
      std::string s = PyStrip(v.str(), nullptr, true, true);
      char* end = nullptr;
      errno = 0;
      long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == 0 && errno == 0) return Value::Int(i);
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0 && std::isfinite(d))
        return Value::Int(static_cast<int64_t>(d));
    }
    return fallback;
  }
  if (name == "float") {
    const Value* dflt = Arg(args, 0, "default");
    Value fallback = dflt ? *dflt : Value::Float(0.0);
    if (v.is_number()) return Value::Float(v.as_double());
    if (v.is_string()) {
      std::string s = PyStrip(v.str(), nullptr, true, true);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0) return Value::Float(d);
    }
    return fallback;
  }
  if (name == "abs") {
    if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.as_double()));
    if (v.is_integral()) {
      if (v.as_int() == INT64_MIN) return IntTooLarge();
      return Value::Int(std::llabs(v.as_int()));
    }
    return TypeError("bad operand type for abs(): " + Quote(KindName(v)));
  }
  if (name == "round") {
    const Value* precision = Arg(args, 0, "precision");
    const Value* method = Arg(args, 1, "method");
    int64_t p = precision && precision->is_integral() ? precision->as_int() : 0;
    std::string m = method && method->is_string() ? method->str() : "common";
    if (!v.is_number())
      return TypeError("round filter needs a number, got " + std::string(KindName(v)));
    if (m == "common") {
      if (v.is_integral()) return Value::Int(v.as_int());
      return Value::Float(PyRound(v.as_double(), p));
    }
    if (m != "ceil" && m != "floor") return InvalidArgument("method must be common, ceil or floor");
    double scale = std::pow(10.0, static_cast<double>(p));
    double x = v.as_double() * scale;
    x = m == "ceil" ? std::ceil(x) : std::floor(x);
    return Value::Float(x / scale);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::MakeList({});
    if (!v.is_dict()) return TypeError("Can only get item pairs from a mapping.");
    std::vector<Value> items;
    for (const auto& [k, x] : v.dict()->entries)
      items.push_back(Value::MakeList({Value::Str(k), x}, true));
    return Value::MakeList(std::move(items));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) return TypeError("You can only sort by either 'key' or 'value'");
    const Value* cs = Arg(args, 0, "case_sensitive");
    const Value* by = Arg(args, 1, "by");
    const Value* rev = Arg(args, 2, "reverse");
    int pos = 0;
    if (by && by->is_string()) {
      if (by->str() == "value") {
        pos = 1;
      } else if (by->str() != "key") {
        return InvalidArgument("You can only sort by either 'key' or 'value'");
      }
    }
    std::vector<Value> items;
    for (const auto& [k, x] : v.dict()->entries)
      items.push_back(Value::MakeList({Value::Str(k), x}, true));
    Status st;
    bool case_sensitive = cs && cs->Truthy();
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      auto c = SortCompare(a.items()[pos], b.items()[pos], case_sensitive);
      if (!c.ok()) {
        st = c.status();
        return false;
      }
      return rev && rev->Truthy() ? *c > 0 : *c < 0;
    });
    if (!st.ok()) return st;
    return Value::MakeList(std::move(items));
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    bool is_sort = name == "sort";
    const Value* rev = is_sort ? Arg(args, 0, "reverse") : nullptr;
    const Value* cs = Arg(args, is_sort ? 1 : 0, "case_sensitive");
    const Value* attribute = Arg(args, is_sort ? 2 : 1, "attribute");
    bool case_sensitive = cs && cs->Truthy();
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    std::vector<Value> keys;
    for (const auto& item : items) {
      if (!IsNoneOrMissing(attribute)) {
        TRACE_ASSIGN_OR_RETURN(Value k, GetPath(*this, item, need_str(*attribute)));
        keys.push_back(k);
      } else {
        keys.push_back(item);
      }
    }
    if (name == "unique") {
      // jinja2 keeps a set of the keys seen. Comparing each key with every earlier one
      // instead was quadratic (100,000 keys: 10^10 comparisons); a hash consistent with
      // PyEquals finds the candidates.
      std::vector<Value> out, seen;
      std::unordered_multimap<size_t, size_t> seen_by_hash;  // PyHash -> index in seen
      for (size_t i = 0; i < items.size(); ++i) {
        Value k = keys[i];
        if (!case_sensitive && k.is_string()) {
          TRACE_ASSIGN_OR_RETURN(k, StrResult(PyLower(k.str(), name + " key")));
        }
        const size_t hash = PyHash(k);
        auto [first, last] = seen_by_hash.equal_range(hash);
        if (std::any_of(first, last, [&](const auto& e) { return PyEquals(seen[e.second], k); })) {
          continue;
        }
        seen_by_hash.emplace(hash, seen.size());
        seen.push_back(k);
        out.push_back(items[i]);
      }
      return Value::MakeList(std::move(out));
    }
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    Status st;
    bool reverse = rev && rev->Truthy();
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      auto c = SortCompare(keys[a], keys[b], case_sensitive);
      if (!c.ok()) {
        st = c.status();
        return false;
      }
      return reverse ? *c > 0 : *c < 0;
    });
    if (!st.ok()) return st;
    if (is_sort) {
      std::vector<Value> out;
      for (size_t i : order) out.push_back(items[i]);
      return Value::MakeList(std::move(out));
    }
    if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    if (name == "min") return items[order.front()];
    // max: the first of the largest keys, as Python's max().
    size_t best = order.back();
    for (size_t i : order) {
      auto c = SortCompare(keys[i], keys[best], case_sensitive);
      if (c.ok() && *c == 0) {
        best = i;
        break;
      }
    }
    return items[best];
  }
  if (name == "sum") {
    const Value* attribute = Arg(args, 0, "attribute");
    const Value* start = Arg(args, 1, "start");
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> terms, ToList(v));
    if (!IsNoneOrMissing(attribute)) {
      for (Value& term : terms) {
        TRACE_ASSIGN_OR_RETURN(term, GetPath(*this, term, need_str(*attribute)));
      }
    }
    return AddAll(start ? *start : Value::Int(0), terms);
  }
  if (name == "attr") {
    const Value* attr = Arg(args, 0, "name");
    if (!attr || !attr->is_string()) return TypeError("attr filter needs a name");
    return GetAttr(v, attr->str());
  }
  if (name == "map") {
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    std::vector<Value> out;
    if (args.positional.empty()) {
      const Value* attribute = args.Keyword("attribute");
      if (!attribute) return TypeError("map filter needs a filter name or attribute=");
      const Value* dflt = args.Keyword("default");
      for (const auto& item : items) {
        TRACE_ASSIGN_OR_RETURN(Value x, GetPath(*this, item, need_str(*attribute)));
        if (x.is_undefined() && dflt) x = *dflt;
        out.push_back(x);
      }
    } else {
      if (!args.positional[0].is_string()) return TypeError("map filter name must be a string");
      std::string filter = args.positional[0].str();
      CallArgs rest;
      rest.positional.assign(args.positional.begin() + 1, args.positional.end());
      rest.keyword = args.keyword;
      for (const auto& item : items) {
        TRACE_ASSIGN_OR_RETURN(Value x, ApplyFilter(filter, item, rest));
        out.push_back(x);
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool want = name == "select" || name == "selectattr";
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    size_t next = 0;
    std::string attr;
    if (by_attr) {
      if (args.positional.empty() || !args.positional[0].is_string()) {
        return TypeError(name + " needs an attribute name");
      }
      attr = args.positional[0].str();
      next = 1;
    }
    std::string test;
    CallArgs test_args;
    if (next < args.positional.size()) {
      if (!args.positional[next].is_string())
        return TypeError(name + ": test name must be a string");
      test = args.positional[next].str();
      test_args.positional.assign(args.positional.begin() + next + 1, args.positional.end());
      test_args.keyword = args.keyword;
    }
    std::vector<Value> out;
    for (const auto& item : items) {
      Value x = item;
      if (by_attr) {
        TRACE_ASSIGN_OR_RETURN(x, GetPath(*this, item, attr));
      }
      bool pass;
      if (test.empty()) {
        pass = x.Truthy();
      } else {
        TRACE_ASSIGN_OR_RETURN(pass, ApplyTest(test, x, test_args));
      }
      if (pass == want) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "center") {
    const Value* w = Arg(args, 0, "width");
    CallArgs a;
    a.positional.push_back(w ? *w : Value::Int(80));
    return CallStrMethod(need_str(v), "center", a);
  }
  return Unsupported("unsupported construct: filter " + Quote(name));
}

namespace {

Result<Value> GetPath(Renderer& r, const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Value key = Value::Str(part);
    if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      int64_t index = 0;
      auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (ec == std::errc()) key = Value::Int(index);
    }
    TRACE_ASSIGN_OR_RETURN(cur, r.GetItem(cur, key));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

}  // namespace

// ---- tests -----------------------------------------------------------------------------------

Result<bool> Renderer::ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
  const Value* arg = Arg(args, 0, "other");
  auto need_arg = [&]() -> Status {
    if (!arg) return TypeError("test " + Quote(name) + " needs an argument");
    return Status::Ok();
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") {
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  }
  if (name == "sequence") {
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  }
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == Kind::kInt;
  if (name == "float") return v.kind() == Kind::kFloat;
  if (name == "boolean") return v.kind() == Kind::kBool;
  if (name == "true") return v.kind() == Kind::kBool && v.as_bool();
  if (name == "false") return v.kind() == Kind::kBool && !v.as_bool();
  if (name == "callable") return v.kind() == Kind::kCallable;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    CallArgs none;
    TRACE_ASSIGN_OR_RETURN(Value r,
                           CallStrMethod(v.str(), name == "lower" ? "islower" : "isupper", none));
    return r.as_bool();
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_integral()) {
      return TypeError("test " + Quote(name) + " needs an integer, got " + KindName(v));
    }
    if (name == "divisibleby") {
      const Value* num = Arg(args, 0, "num");
      if (!num || !num->is_integral() || num->as_int() == 0) {
        return TypeError("divisibleby needs a non-zero integer");
      }
      return v.as_int() % num->as_int() == 0;
    }
    bool odd = v.as_int() % 2 != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "eq" || name == "equalto" || name == "==") {
    TRACE_RETURN_IF_ERROR(need_arg());
    return PyEquals(v, *arg);
  }
  if (name == "ne" || name == "!=") {
    TRACE_RETURN_IF_ERROR(need_arg());
    return !PyEquals(v, *arg);
  }
  if (name == "sameas") {
    TRACE_RETURN_IF_ERROR(need_arg());
    if (v.kind() != arg->kind()) return false;
    if (v.is_none() || v.kind() == Kind::kBool) return PyEquals(v, *arg);
    if (v.is_list()) return v.list_ptr() == arg->list_ptr();
    if (v.is_dict() || v.kind() == Kind::kNamespace) return v.dict() == arg->dict();
    return false;
  }
  if (name == "lt" || name == "lessthan" || name == "le" || name == "gt" || name == "greaterthan" ||
      name == "ge") {
    TRACE_RETURN_IF_ERROR(need_arg());
    std::string op = (name == "lt" || name == "lessthan")      ? "<"
                     : name == "le"                            ? "<="
                     : (name == "gt" || name == "greaterthan") ? ">"
                                                               : ">=";
    TRACE_ASSIGN_OR_RETURN(Value r, Binary(op, v, *arg));
    return r.as_bool();
  }
  if (name == "in") {
    const Value* seq = Arg(args, 0, "seq");
    if (!seq) return TypeError("test 'in' needs a sequence");
    return Contains(*seq, v);
  }
  return Unsupported("unsupported construct: test " + Quote(name));
}

}  // namespace trace::engine::tmpl
