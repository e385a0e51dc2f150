// jinja2's filters as chat templates use them (filters.py): one function per filter, and the
// table of their names (FindFilter) that ApplyFilter and the parse-time check read.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/template/py_string.h"
#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

std::vector<Value> ItemPairs(const Value& dict) {
  std::vector<Value> items;
  for (const auto& [k, x] : dict.dict()->entries)
    items.push_back(Value::MakeList({Value::Str(k), x}, true));
  return items;
}

namespace {

bool IsNoneOrMissing(const Value* v) {
  return !v || v->is_none();
}

// jinja2's make_attrgetter: "a.b.0" walks items with getitem semantics.
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

// ---- the filters ---------------------------------------------------------------------------
//
// Each is a FilterFn (renderer.h): the renderer, the name the template called it by, the
// value and the arguments. ToPyStr is jinja2's soft_str, the string a text filter works on.

// tojson's indent: none, spaces (an int) or a string repeated per level.
Result<std::optional<std::string>> JsonIndent(const Value* indent) {
  if (IsNoneOrMissing(indent)) return std::optional<std::string>();
  if (indent->is_integral()) {
    if (indent->as_int() > kMaxIndent) return WidthTooLarge("tojson indent");
    return std::optional<std::string>(
        std::string(static_cast<size_t>(std::max<int64_t>(0, indent->as_int())), ' '));
  }
  if (indent->is_string()) {
    // Repeated once per nesting level on every line, as an int indent is.
    if (indent->str().size() > static_cast<size_t>(kMaxIndent)) {
      return WidthTooLarge("tojson indent");
    }
    return std::optional<std::string>(indent->str());
  }
  return TypeError("tojson: indent must be an int, a string or None");
}

// transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False)
Result<Value> ToJsonFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
  const Value* ensure_ascii = Arg(args, 0, "ensure_ascii");
  const Value* separators = Arg(args, 2, "separators");
  const Value* sort_keys = Arg(args, 3, "sort_keys");
  TRACE_ASSIGN_OR_RETURN(std::optional<std::string> ind, JsonIndent(Arg(args, 1, "indent")));
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

Result<Value> SafeFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  return v;
}

Result<Value> StringFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  std::string s = ToPyStr(v);
  if (s.size() > MaxBuiltSize()) return TooLarge("string result");  // see ToPyStr
  return Value::Str(std::move(s));
}

// e, escape, forceescape.
Result<Value> EscapeFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  TRACE_ASSIGN_OR_RETURN(std::string escaped, HtmlEscape(ToPyStr(v)));
  return Value::Str(std::move(escaped));
}

Result<Value> TrimFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
  const Value* chars = Arg(args, 0, "chars");
  const std::string* set = (chars && chars->is_string()) ? &chars->str() : nullptr;
  return Value::Str(PyStrip(ToPyStr(v), set, true, true));
}

Result<Value> UpperFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  return StrResult(PyUpper(ToPyStr(v), "upper result"));
}

Result<Value> LowerFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  return StrResult(PyLower(ToPyStr(v), "lower result"));
}

Result<Value> CapitalizeFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  return StrResult(PyCapitalize(ToPyStr(v), "capitalize result"));
}

Result<Value> TitleFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  return StrResult(JinjaTitle(ToPyStr(v), "title result"));
}

// length, count.
Result<Value> LengthFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
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

Result<Value> WordcountFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(ToPyStr(v))) {
    bool w = c == '_' || IsAlnumCp(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

// default, d.
Result<Value> DefaultFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
  const Value* dflt = Arg(args, 0, "default_value");
  const Value* boolean = Arg(args, 1, "boolean");
  bool use = v.is_undefined() || (boolean && boolean->Truthy() && !v.Truthy());
  if (use) return dflt ? *dflt : Value::Str("");
  return v;
}

Result<Value> ListFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  return Value::MakeList(std::move(items));
}

// first and last: the item at one end, undefined when there is none.
Result<Value> EndItem(const Value& v, bool first) {
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return first ? items.front() : items.back();
}

Result<Value> FirstFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  return EndItem(v, true);
}

Result<Value> LastFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  return EndItem(v, false);
}

Result<Value> ReverseFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    auto cps = DecodeUtf8(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::Str(EncodeUtf8(std::u32string_view(cps.data(), cps.size())));
  }
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

Result<Value> JoinFilter(Renderer& r, const std::string&, const Value& v, CallArgs& args) {
  const Value* sep = Arg(args, 0, "d");
  const Value* attribute = Arg(args, 1, "attribute");
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  std::string out, d = sep ? ToPyStr(*sep) : "";
  // The separators alone: refused before anything is built.
  if (!items.empty() && d.size() > 0 && items.size() - 1 > MaxBuiltSize() / d.size()) {
    return TooLarge("join result");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    std::string piece;
    if (!IsNoneOrMissing(attribute)) {
      TRACE_ASSIGN_OR_RETURN(Value x, GetPath(r, items[i], ToPyStr(*attribute)));
      piece = ToPyStr(x);
    } else {
      piece = ToPyStr(items[i]);
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

Result<Value> ReplaceFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
  const Value* old = Arg(args, 0, "old");
  const Value* repl = Arg(args, 1, "new");
  const Value* count = Arg(args, 2, "count");
  if (!old || !repl) return TypeError("replace filter needs old and new");
  std::string s = ToPyStr(v), o = ToPyStr(*old), r = ToPyStr(*repl);
  const int64_t n = IsNoneOrMissing(count) ? -1 : count->as_int();
  // Each match may grow by the length of `new`: measured before it is built.
  if (PyReplaceSize(s, o, r, n) > MaxBuiltSize()) return TooLarge("replace result");
  return Value::Str(PyReplace(s, o, r, n));
}

// indent's `width`: a string, or that many spaces (4 when it is neither).
Result<std::string> Indention(const Value* width) {
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
  return indention;
}

Result<Value> IndentFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
  const Value* first = Arg(args, 1, "first");
  const Value* blank = Arg(args, 2, "blank");
  TRACE_ASSIGN_OR_RETURN(std::string indention, Indention(Arg(args, 0, "width")));
  std::string s = ToPyStr(v) + "\n";
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

Result<Value> IntFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
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

Result<Value> FloatFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
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

Result<Value> AbsFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.as_double()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return IntTooLarge();
    return Value::Int(std::llabs(v.as_int()));
  }
  return TypeError("bad operand type for abs(): " + Quote(KindName(v)));
}

Result<Value> RoundFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
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

Result<Value> ItemsFilter(Renderer&, const std::string&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::MakeList({});
  if (!v.is_dict()) return TypeError("Can only get item pairs from a mapping.");
  return Value::MakeList(ItemPairs(v));
}

Result<Value> DictsortFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
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
  std::vector<Value> items = ItemPairs(v);
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

// What sort, unique, min and max compare: each item, or its `attribute` (a dotted path).
Result<std::vector<Value>> SortKeys(Renderer& r, const std::vector<Value>& items,
                                    const Value* attribute) {
  std::vector<Value> keys;
  for (const auto& item : items) {
    if (!IsNoneOrMissing(attribute)) {
      TRACE_ASSIGN_OR_RETURN(Value k, GetPath(r, item, ToPyStr(*attribute)));
      keys.push_back(k);
    } else {
      keys.push_back(item);
    }
  }
  return keys;
}

// The indices of `keys` in stable sorted order (largest first with `reverse`).
Result<std::vector<size_t>> SortedOrder(const std::vector<Value>& keys, bool case_sensitive,
                                        bool reverse) {
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status st;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto c = SortCompare(keys[a], keys[b], case_sensitive);
    if (!c.ok()) {
      st = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  if (!st.ok()) return st;
  return order;
}

Result<Value> SortFilter(Renderer& r, const std::string&, const Value& v, CallArgs& args) {
  const Value* rev = Arg(args, 0, "reverse");
  const Value* cs = Arg(args, 1, "case_sensitive");
  const Value* attribute = Arg(args, 2, "attribute");
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> keys, SortKeys(r, items, attribute));
  TRACE_ASSIGN_OR_RETURN(std::vector<size_t> order,
                         SortedOrder(keys, cs && cs->Truthy(), rev && rev->Truthy()));
  std::vector<Value> out;
  for (size_t i : order) out.push_back(items[i]);
  return Value::MakeList(std::move(out));
}

Result<Value> UniqueFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* attribute = Arg(args, 1, "attribute");
  bool case_sensitive = cs && cs->Truthy();
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> keys, SortKeys(r, items, attribute));
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

// min and max: the smallest (largest) item by its key, undefined when there is none.
Result<Value> Extreme(Renderer& r, const Value& v, CallArgs& args, bool largest) {
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* attribute = Arg(args, 1, "attribute");
  bool case_sensitive = cs && cs->Truthy();
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> keys, SortKeys(r, items, attribute));
  TRACE_ASSIGN_OR_RETURN(std::vector<size_t> order, SortedOrder(keys, case_sensitive, false));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  if (!largest) return items[order.front()];
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

Result<Value> MinFilter(Renderer& r, const std::string&, const Value& v, CallArgs& args) {
  return Extreme(r, v, args, false);
}

Result<Value> MaxFilter(Renderer& r, const std::string&, const Value& v, CallArgs& args) {
  return Extreme(r, v, args, true);
}

Result<Value> SumFilter(Renderer& r, const std::string&, const Value& v, CallArgs& args) {
  const Value* attribute = Arg(args, 0, "attribute");
  const Value* start = Arg(args, 1, "start");
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> terms, ToList(v));
  if (!IsNoneOrMissing(attribute)) {
    for (Value& term : terms) {
      TRACE_ASSIGN_OR_RETURN(term, GetPath(r, term, ToPyStr(*attribute)));
    }
  }
  return Renderer::AddAll(start ? *start : Value::Int(0), terms);
}

Result<Value> AttrFilter(Renderer& r, const std::string&, const Value& v, CallArgs& args) {
  const Value* attr = Arg(args, 0, "name");
  if (!attr || !attr->is_string()) return TypeError("attr filter needs a name");
  return r.GetAttr(v, attr->str());
}

// map(attribute=..., default=...): each item's attribute.
Result<Value> MapAttribute(Renderer& r, const std::vector<Value>& items, CallArgs& args) {
  const Value* attribute = args.Keyword("attribute");
  if (!attribute) return TypeError("map filter needs a filter name or attribute=");
  const Value* dflt = args.Keyword("default");
  std::vector<Value> out;
  for (const auto& item : items) {
    TRACE_ASSIGN_OR_RETURN(Value x, GetPath(r, item, ToPyStr(*attribute)));
    if (x.is_undefined() && dflt) x = *dflt;
    out.push_back(x);
  }
  return Value::MakeList(std::move(out));
}

// map('filter', args...): the filter on each item (looked up once; an unknown one fails at
// the first item, as applying it would).
Result<Value> MapFilter(Renderer& r, const std::string&, const Value& v, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  if (args.positional.empty()) return MapAttribute(r, items, args);
  if (!args.positional[0].is_string()) return TypeError("map filter name must be a string");
  std::string filter = args.positional[0].str();
  FilterFn fn = FindFilter(filter);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  std::vector<Value> out;
  for (const auto& item : items) {
    if (!fn) return UnknownFilter(filter);
    TRACE_ASSIGN_OR_RETURN(Value x, fn(r, filter, item, rest));
    out.push_back(x);
  }
  return Value::MakeList(std::move(out));
}

// What select, reject, selectattr and rejectattr were asked: the attribute (by_attr), and the
// test with its arguments (no test: the item's truth).
struct Selection {
  std::string attr;
  std::string test;
  TestFn test_fn = nullptr;
  CallArgs test_args;
};

Result<Selection> ParseSelection(const std::string& name, CallArgs& args, bool by_attr) {
  Selection s;
  size_t next = 0;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return TypeError(name + " needs an attribute name");
    }
    s.attr = args.positional[0].str();
    next = 1;
  }
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return TypeError(name + ": test name must be a string");
    s.test = args.positional[next].str();
    s.test_fn = FindTest(s.test);
    s.test_args.positional.assign(args.positional.begin() + next + 1, args.positional.end());
    s.test_args.keyword = args.keyword;
  }
  return s;
}

// The items whose test result (or attribute's) is `want`.
Result<Value> Select(Renderer& r, const std::string& name, const Value& v, CallArgs& args,
                     bool by_attr, bool want) {
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
  TRACE_ASSIGN_OR_RETURN(Selection s, ParseSelection(name, args, by_attr));
  std::vector<Value> out;
  for (const auto& item : items) {
    Value x = item;
    if (by_attr) {
      TRACE_ASSIGN_OR_RETURN(x, GetPath(r, item, s.attr));
    }
    bool pass;
    if (s.test.empty()) {
      pass = x.Truthy();
    } else {
      if (!s.test_fn) return UnknownTest(s.test);
      TRACE_ASSIGN_OR_RETURN(pass, s.test_fn(s.test, x, s.test_args));
    }
    if (pass == want) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Result<Value> SelectFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  return Select(r, name, v, args, false, true);
}

Result<Value> RejectFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  return Select(r, name, v, args, false, false);
}

Result<Value> SelectattrFilter(Renderer& r, const std::string& name, const Value& v,
                               CallArgs& args) {
  return Select(r, name, v, args, true, true);
}

Result<Value> RejectattrFilter(Renderer& r, const std::string& name, const Value& v,
                               CallArgs& args) {
  return Select(r, name, v, args, true, false);
}

Result<Value> CenterFilter(Renderer&, const std::string&, const Value& v, CallArgs& args) {
  const Value* w = Arg(args, 0, "width");
  CallArgs a;
  a.positional.push_back(w ? *w : Value::Int(80));
  return CallStrMethod(ToPyStr(v), "center", a);
}

// Every filter, by every name it has: the one list of them.
const NameTable<FilterFn>& Filters() {
  static const NameTable<FilterFn> kFilters = {
      {"tojson", ToJsonFilter},
      {"safe", SafeFilter},
      {"string", StringFilter},
      {"e", EscapeFilter},
      {"escape", EscapeFilter},
      {"forceescape", EscapeFilter},
      {"trim", TrimFilter},
      {"upper", UpperFilter},
      {"lower", LowerFilter},
      {"capitalize", CapitalizeFilter},
      {"title", TitleFilter},
      {"length", LengthFilter},
      {"count", LengthFilter},
      {"wordcount", WordcountFilter},
      {"default", DefaultFilter},
      {"d", DefaultFilter},
      {"list", ListFilter},
      {"first", FirstFilter},
      {"last", LastFilter},
      {"reverse", ReverseFilter},
      {"join", JoinFilter},
      {"replace", ReplaceFilter},
      {"indent", IndentFilter},
      {"int", IntFilter},
      {"float", FloatFilter},
      {"abs", AbsFilter},
      {"round", RoundFilter},
      {"items", ItemsFilter},
      {"dictsort", DictsortFilter},
      {"sort", SortFilter},
      {"unique", UniqueFilter},
      {"min", MinFilter},
      {"max", MaxFilter},
      {"sum", SumFilter},
      {"attr", AttrFilter},
      {"map", MapFilter},
      {"select", SelectFilter},
      {"reject", RejectFilter},
      {"selectattr", SelectattrFilter},
      {"rejectattr", RejectattrFilter},
      {"center", CenterFilter},
  };
  return kFilters;
}

}  // namespace

FilterFn FindFilter(std::string_view name) {
  return Filters().Find(name);
}

Status UnknownFilter(const std::string& name) {
  return Unsupported("unsupported construct: filter " + Quote(name));
}

Result<Value> Renderer::ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
  FilterFn fn = FindFilter(name);
  if (!fn) return UnknownFilter(name);
  return fn(*this, name, v, args);
}

}  // namespace trace::engine::tmpl
