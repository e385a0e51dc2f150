// Values as Python objects: truthiness, str(), repr(), ==, json.dumps, UTF-8 helpers.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

Value Value::MakeList(std::vector<Value> items, bool tuple) {
  Value v(Kind::kList);
  v.list_ = std::make_shared<List>();
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth());
  v.list_->items = std::move(items);
  v.list_->tuple = tuple;
  v.list_->depth = deepest + 1;
  return v;
}

Value Value::MakeDict(std::shared_ptr<Dict> dict) {
  Value v(Kind::kDict);
  int deepest = 0;
  for (const auto& [k, item] : dict->entries) deepest = std::max(deepest, item.depth());
  dict->depth = deepest + 1;
  v.dict_ = std::move(dict);
  return v;
}

Value Value::MakeDict(std::shared_ptr<Dict> dict, int depth) {
  Value v(Kind::kDict);
  dict->depth = depth;
  v.dict_ = std::move(dict);
  return v;
}

Value Value::MakeNamespace(std::shared_ptr<Dict> dict) {
  Value v(Kind::kNamespace);
  v.dict_ = std::move(dict);
  return v;
}

Value Value::MakeCallable(std::shared_ptr<Callable> fn) {
  Value v(Kind::kCallable);
  v.fn_ = std::move(fn);
  return v;
}

namespace {

// FromJson below `depth` levels of arrays and objects; sets `*too_deep` (and gives up on
// the rest) past kMaxValueDepth. A flag, not a Result per node: this converts every
// message of every render.
Value FromJsonAt(const nlohmann::ordered_json& j, int depth, bool* too_deep) {
  if (j.is_structured() && depth >= kMaxValueDepth) *too_deep = true;
  if (*too_deep) return Value::None();
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonAt(e, depth + 1, too_deep));
      return Value::MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      // An ordered_json's keys are distinct, so no Set (a search per key: quadratic in a
      // request's object of a million keys).
      auto d = std::make_shared<Dict>();
      d->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        d->entries.emplace_back(it.key(), FromJsonAt(it.value(), depth + 1, too_deep));
      }
      return Value::MakeDict(std::move(d));
    }
    default:
      return Value::None();  // binary / discarded do not come from JSON text
  }
}

}  // namespace

Result<Value> Value::FromJson(const nlohmann::ordered_json& j) {
  bool too_deep = false;
  Value v = FromJsonAt(j, 0, &too_deep);
  if (too_deep) {
    return InvalidArgument("JSON value nested more than " + std::to_string(kMaxValueDepth) +
                           " levels deep");
  }
  return v;
}

const std::vector<Value>& Value::items() const {
  static const std::vector<Value> kEmpty;
  return list_ ? list_->items : kEmpty;
}

bool Value::is_tuple() const {
  return list_ && list_->tuple;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !str_.empty();
    case Kind::kList:
      return !list_->items.empty();
    case Kind::kDict:
      return !dict_->entries.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

// ---- freeing without deep recursion ----

namespace {

// Freeing a value recurses one ~List/~Dict (and a few other frames) per level. Up to this
// many levels it may, as it costs nothing extra; below, values are freed in a loop. Lists
// and dicts stop at kMaxValueDepth, but namespaces and callables (a bound method holds its
// dict) can chain without bound.
constexpr int kRecursiveFrees = 64;

// ~List/~Dict frames now recursing on this thread, up to kRecursiveFrees.
thread_local int free_depth = 0;

// While the ~List/~Dict at kRecursiveFrees frees its items in a loop: the values it has
// yet to free. Deeper destructors hand their items to it instead of freeing them.
thread_local std::vector<Value>* pending_frees = nullptr;

// True when dropping `v` would free a container or callable it alone holds: only those
// can recurse. use_count() == 1 is exact here: no other owner exists to take a reference.
bool HoldsLast(const Value& v) {
  return (v.list_ptr() && v.list_ptr().use_count() == 1) ||
         (v.dict() && v.dict().use_count() == 1) || (v.callable() && v.callable().use_count() == 1);
}

// FreeItems below kRecursiveFrees: hands what could recurse to the loop of the frame at
// kRecursiveFrees, or is that frame. Out of line: the shallow path stays small.
template <typename Items, typename Get>
[[gnu::noinline]] void FreeItemsDeep(Items& items, Get get) {
  if (pending_frees) {
    for (auto& item : items) {
      if (HoldsLast(get(item))) pending_frees->push_back(std::move(get(item)));
    }
    return;  // what is left frees without recursing: scalars, strings, shared containers
  }
  std::vector<Value> pending;
  for (auto& item : items) {
    if (HoldsLast(get(item))) pending.push_back(std::move(get(item)));
  }
  pending_frees = &pending;
  while (!pending.empty()) {
    // Moved out first: freeing it may push onto `pending`, which may reallocate.
    Value last = std::move(pending.back());
    pending.pop_back();
  }
  pending_frees = nullptr;
}

// Frees `items` (Values, or pairs whose second is one): recursively while shallow (the
// common case: a thread-local counter more than the vector's own destructor), else with
// FreeItemsDeep.
template <typename Items, typename Get>
void FreeItems(Items& items, Get get) {
  if (free_depth < kRecursiveFrees) [[likely]] {
    ++free_depth;
    items.clear();
    --free_depth;
    return;
  }
  FreeItemsDeep(items, get);
}

}  // namespace

List::~List() {
  FreeItems(items, [](Value& v) -> Value& { return v; });
}

Dict::~Dict() {
  FreeItems(entries, [](std::pair<std::string, Value>& e) -> Value& { return e.second; });
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(const std::string& key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

// ---- UTF-8 ----

char32_t NextCodePoint(std::string_view s, size_t* i) {
  const unsigned char c = s[*i];
  char32_t cp;
  size_t len;
  if (c < 0x80) {
    ++*i;
    return c;
  } else if ((c >> 5) == 6) {
    cp = c & 0x1F;
    len = 2;
  } else if ((c >> 4) == 14) {
    cp = c & 0x0F;
    len = 3;
  } else if ((c >> 3) == 30) {
    cp = c & 0x07;
    len = 4;
  } else {
    ++*i;
    return 0xFFFD;
  }
  if (*i + len > s.size()) {
    ++*i;
    return 0xFFFD;
  }
  for (size_t k = 1; k < len; ++k) {
    const unsigned char cc = s[*i + k];
    if ((cc >> 6) != 2) {
      ++*i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  *i += len;
  return cp;
}

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(NextCodePoint(s, &i));
  return out;
}

size_t Utf8Length(char32_t c) {
  return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

void AppendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string EncodeUtf8(const std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(out, c);
  return out;
}

bool IsPyWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  // Fast path for ASCII-only default stripping.
  std::vector<char32_t> cps = DecodeUtf8(s);
  std::vector<char32_t> set;
  if (chars) set = DecodeUtf8(*chars);
  auto strip_me = [&](char32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsPyWhitespace(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_me(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_me(cps[e - 1])) --e;
  }
  // Re-slice the original bytes to keep invalid sequences as they were when possible.
  if (b == 0 && e == cps.size()) return std::string(s);
  return EncodeUtf8(std::u32string_view(cps.data() + b, e - b));
}

// ---- printing ----

std::string FormatPyFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci = [-]D[.DDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  int decpt = exp + 1;  // value = 0.DIGITS * 10^decpt
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    // Appends, not "." + string: GCC 12 warns falsely on that form (-Wrestrict, PR 105329).
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  } else if (decpt <= 0) {
    out = "0." + std::string(-decpt, '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out = digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return neg ? "-" + out : out;
}

namespace {

bool IsPyPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD) return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || c == 0x1680) {
    return false;
  }
  if (c >= 0xD800 && c <= 0xDFFF) return false;
  if (c >= 0xE000 && c <= 0xF8FF) return false;  // private use
  return true;
}

std::string ReprString(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  out.reserve(s.size() + 2);
  for (char32_t c : DecodeUtf8(s)) {
    // Printable ASCII as it is, without the Unicode table look-up below: str() of a list
    // of long strings runs through here byte by byte.
    if (c >= 0x20 && c < 0x7f && c != static_cast<char32_t>(quote) && c != '\\') {
      out.push_back(static_cast<char>(c));
      continue;
    }
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (!IsPyPrintable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      AppendUtf8(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace

std::string ToPyRepr(const Value& v) {
  if (v.is_string()) return ReprString(v.str());
  if (v.is_undefined()) return "Undefined";
  return ToPyStr(v);
}

std::string ToPyStr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(v.as_int());
    case Kind::kFloat:
      return FormatPyFloat(v.as_double());
    case Kind::kString:
      return v.str();
    case Kind::kList: {
      const auto& items = v.items();
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) {
        // A list of a million references to one long string is cheap to build; its str is
        // not. Stop once past the bound (see ToPyStr in template_internal.h).
        if (out.size() > MaxBuiltSize()) return out;
        if (i) out += ", ";
        out += ToPyRepr(items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      return out;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.dict()->entries) {
        if (out.size() > MaxBuiltSize()) return out;  // as for a list
        if (!first) out += ", ";
        first = false;
        out += ReprString(k) + ": " + ToPyRepr(val);
      }
      return out + "}";
    }
    case Kind::kNamespace:
      return "<Namespace>";
    case Kind::kCallable:
      return "<function " + v.callable()->name + ">";
  }
  return "";
}

const char* KindName(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return v.is_tuple() ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

size_t PyHash(const Value& v) {
  // Mixes a hash into a running one (boost's hash_combine constant).
  const auto mix = [](size_t seed, size_t h) {
    return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  };
  if (v.is_number()) {
    // PyEquals compares an int with a float (or two floats) as doubles: hash the double,
    // with -0.0 as 0.0. Two ints equal as doubles but not as ints only share a bucket.
    const double d = v.as_double();
    return std::hash<double>{}(d == 0 ? 0.0 : d);
  }
  const size_t kind = static_cast<size_t>(v.kind());
  switch (v.kind()) {
    case Kind::kString:
      return mix(kind, std::hash<std::string>{}(v.str()));
    case Kind::kList: {
      size_t h = mix(kind, v.is_tuple());
      for (const Value& item : v.items()) h = mix(h, PyHash(item));
      return h;
    }
    case Kind::kDict: {
      size_t sum = 0;  // order-independent, as dict equality is
      for (const auto& [key, value] : v.dict()->entries) {
        sum += mix(std::hash<std::string>{}(key), PyHash(value));
      }
      return mix(kind, sum);
    }
    case Kind::kNamespace:
      return mix(kind, std::hash<const void*>{}(v.dict().get()));
    case Kind::kCallable:
      return mix(kind, std::hash<const void*>{}(v.callable().get()));
    default:
      return kind;
  }
}

bool PyEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!PyEquals(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const auto& x = a.dict()->entries;
      const auto& y = b.dict()->entries;
      if (x.size() != y.size()) return false;
      if (x.size() <= 16) {
        for (const auto& [k, v] : x) {
          const Value* other = b.dict()->Find(k);
          if (!other || !PyEquals(v, *other)) return false;
        }
        return true;
      }
      // Find scans, so a lookup per key was quadratic in two large dicts.
      std::unordered_map<std::string_view, const Value*> in_b;
      in_b.reserve(y.size());
      for (const auto& [k, v] : y) in_b.emplace(k, &v);
      for (const auto& [k, v] : x) {
        const auto other = in_b.find(k);
        if (other == in_b.end() || !PyEquals(v, *other->second)) return false;
      }
      return true;
    }
    case Kind::kNamespace:
      return a.dict() == b.dict();
    case Kind::kCallable:
      return a.callable() == b.callable();
    default:
      return false;
  }
}

// ---- json.dumps ----

namespace {

void JsonString(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  if (ensure_ascii) {
    for (char32_t c : DecodeUtf8(s)) {
      if (c < 0x80) {
        std::string one(1, static_cast<char>(c));
        std::string escaped;
        JsonString(escaped, one, false);
        out += escaped.substr(1, escaped.size() - 2);
        continue;
      }
      char buf[16];
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    }
    out.push_back('"');
    return;
  }
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

Status JsonValue(std::string& out, const Value& v, const std::optional<std::string>& indent,
                 int depth, const std::string& item_sep, const std::string& key_sep, bool sort_keys,
                 bool ensure_ascii) {
  auto newline = [&](int d) {
    if (!indent) return;
    out.push_back('\n');
    // Stops at the bound; the check before the next item or at the end reports it.
    for (int i = 0; i < d && out.size() <= MaxBuiltSize(); ++i) out += *indent;
  };
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return Status::Ok();
    case Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return Status::Ok();
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return Status::Ok();
    case Kind::kFloat: {
      double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += FormatPyFloat(d);
      }
      return Status::Ok();
    }
    case Kind::kString:
      JsonString(out, v.str(), ensure_ascii);
      return Status::Ok();
    case Kind::kList: {
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return Status::Ok();
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        // As str(): items may share one long string, and the indent repeats per level.
        if (out.size() > MaxBuiltSize()) return TooLarge("tojson result");
        if (i) out += item_sep;
        newline(depth + 1);
        TRACE_RETURN_IF_ERROR(JsonValue(out, items[i], indent, depth + 1, item_sep, key_sep,
                                        sort_keys, ensure_ascii));
      }
      newline(depth);
      out.push_back(']');
      return Status::Ok();
    }
    case Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.dict()->entries) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return Status::Ok();
      }
      if (sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (out.size() > MaxBuiltSize()) return TooLarge("tojson result");
        if (i) out += item_sep;
        newline(depth + 1);
        JsonString(out, entries[i]->first, ensure_ascii);
        out += key_sep;
        TRACE_RETURN_IF_ERROR(JsonValue(out, entries[i]->second, indent, depth + 1, item_sep,
                                        key_sep, sort_keys, ensure_ascii));
      }
      newline(depth);
      out.push_back('}');
      return Status::Ok();
    }
    default:
      return InvalidArgument(std::string("Object of type ") + KindName(v) +
                             " is not JSON serializable");
  }
}

}  // namespace

Result<std::string> ToJson(const Value& v, const std::optional<std::string>& indent,
                           const std::string& item_sep, const std::string& key_sep, bool sort_keys,
                           bool ensure_ascii) {
  std::string out;
  TRACE_RETURN_IF_ERROR(JsonValue(out, v, indent, 0, item_sep, key_sep, sort_keys, ensure_ascii));
  // The checks above run between items: the last item may have taken it past the bound.
  if (out.size() > MaxBuiltSize()) return TooLarge("tojson result");
  return out;
}

}  // namespace trace::engine::tmpl
