#include "recorder/grammar/json_schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "base/escape.h"
#include "recorder/grammar/number_ranges.h"

namespace trace::recorder::grammar {
namespace {

using ojson = nlohmann::ordered_json;
using Expr = GrammarBuilder::Expr;

// Validation keywords this compiler enforces.
const std::set<std::string>& Supported() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "minItems",
                                          "maxItems",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "minLength",
                                          "maxLength"};
  return k;
}

// Validation keywords known to JSON Schema that it does not enforce.
const std::set<std::string>& Unsupported() {
  static const std::set<std::string> k = {"pattern",
                                          "format",
                                          "multipleOf",
                                          "minProperties",
                                          "maxProperties",
                                          "patternProperties",
                                          "propertyNames",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "dependencies",
                                          "not",
                                          "if",
                                          "then",
                                          "else",
                                          "prefixItems",
                                          "additionalItems",
                                          "unevaluatedItems",
                                          "unevaluatedProperties",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "uniqueItems",
                                          "$dynamicRef",
                                          "$recursiveRef"};
  return k;
}

// "WHERE: WHAT". WHERE holds the client's property names and $ref strings, so it is
// escaped (and clipped at its start, keeping the most specific part) here, once; values
// quoted in WHAT are escaped where they are quoted.
Status Located(const std::string& where, const std::string& what) {
  return InvalidArgument(EscapePathForDisplay(where) + ": " + what);
}

bool IsTrue(const ojson& s, const char* key) {
  auto it = s.find(key);
  return it != s.end() && it->is_boolean() && it->get<bool>();
}

std::string SupportedList() {
  std::string s;
  for (const std::string& k : Supported()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

class Compiler {
 public:
  Compiler(GrammarBuilder* b, const ojson& root, const SchemaOptions& o)
      : b_(b), root_(root), options_(o) {}

  // A rule for the schema at `s` (reached at `where`).
  Result<int32_t> RuleFor(const ojson& s, const std::string& where) {
    TRACE_ASSIGN_OR_RETURN(Expr e, Value(s, where, 0));
    int32_t rule = b_->DeclareRule(where);
    b_->DefineRule(rule, e);
    return rule;
  }

  int32_t AnyValueRule() {
    if (any_value_ >= 0) return any_value_;
    any_value_ = b_->DeclareRule("any_value");
    int32_t object = b_->DeclareRule("any_object");
    int32_t array = b_->DeclareRule("any_array");
    int32_t str = b_->StringRule(0, -1);
    b_->DefineRule(any_value_,
                   b_->Alt({b_->Call(object), b_->Call(array), b_->Call(str), AnyNumber(b_),
                            b_->Literal("true"), b_->Literal("false"), b_->Literal("null")}));
    Expr member = b_->Seq({b_->Call(str), b_->Literal(": "), b_->Call(any_value_)});
    b_->DefineRule(
        object, b_->Seq({b_->Literal("{"),
                         b_->Opt(b_->Seq({member, b_->Star(b_->Seq({b_->Literal(", "), member}))})),
                         b_->Literal("}")}));
    Expr item = b_->Call(any_value_);
    b_->DefineRule(array,
                   b_->Seq({b_->Literal("["),
                            b_->Opt(b_->Seq({item, b_->Star(b_->Seq({b_->Literal(", "), item}))})),
                            b_->Literal("]")}));
    any_object_ = object;
    return any_value_;
  }

  int32_t AnyObjectRule() {
    AnyValueRule();
    return any_object_;
  }

 private:
  Status Error(const std::string& where, const std::string& what) const {
    return Located(where, what);
  }

  // Checks the keywords of `s`: in strict mode a known but unsupported one is an error.
  Status CheckKeywords(const ojson& s, const std::string& where) const {
    if (!options_.strict) return Status::Ok();
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (Unsupported().count(k) && !(k == "uniqueItems" && !IsTrue(s, "uniqueItems"))) {
        return Error(where, "keyword '" + k + "' is not supported with strict: true (supported: " +
                                SupportedList() + ")");
      }
    }
    return Status::Ok();
  }

  Result<const ojson*> Resolve(const std::string& ref, const std::string& where) {
    const std::string shown = EscapeForDisplay(ref);
    if (ref.empty() || ref[0] != '#') {
      return Error(where,
                   "$ref '" + shown + "' is not supported (only refs within the schema, '#...')");
    }
    const ojson* node = &root_;
    std::string pointer = ref.substr(1);
    size_t pos = 0;
    while (pos < pointer.size()) {
      if (pointer[pos] != '/') return Error(where, "$ref '" + shown + "' is not a JSON pointer");
      size_t next = pointer.find('/', pos + 1);
      std::string token =
          pointer.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      std::string unescaped;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size()) {
          unescaped += token[i + 1] == '1' ? '/' : '~';
          ++i;
        } else {
          unescaped += token[i];
        }
      }
      size_t index = 0;
      const char* digits_end = unescaped.data() + unescaped.size();
      if (node->is_object() && node->contains(unescaped)) {
        node = &(*node)[unescaped];
      } else if (node->is_array() && !unescaped.empty() &&
                 unescaped.find_first_not_of("0123456789") == std::string::npos &&
                 std::from_chars(unescaped.data(), digits_end, index).ptr == digits_end &&
                 index < node->size()) {  // from_chars fails (ptr stays) on overflow
        node = &(*node)[index];
      } else {
        return Error(where, "$ref '" + shown + "' points at nothing in the schema");
      }
      pos = next == std::string::npos ? pointer.size() : next;
    }
    return node;
  }

  // The expression of one JSON value valid under `s`.
  Result<Expr> Value(const ojson& s, const std::string& where, int depth) {
    if (depth > 64) return Error(where, "schema nested too deeply (over 64 levels)");
    if (s.is_boolean()) {
      if (s.get<bool>()) return b_->Call(AnyValueRule());
      return Error(where, "the schema 'false' allows no value");
    }
    if (!s.is_object()) return Error(where, "a schema must be an object or a boolean");
    TRACE_RETURN_IF_ERROR(CheckKeywords(s, where));
    if (auto ref = s.find("$ref"); ref != s.end()) {
      if (!ref->is_string()) return Error(where + ".$ref", "must be a string");
      const std::string target = ref->get<std::string>();
      auto known = refs_.find(target);
      if (known != refs_.end()) return b_->Call(known->second);
      TRACE_ASSIGN_OR_RETURN(const ojson* node, Resolve(target, where + ".$ref"));
      // Declared before compiling, so a recursive schema calls itself.
      int32_t rule = b_->DeclareRule(target);
      refs_[target] = rule;
      TRACE_ASSIGN_OR_RETURN(Expr body, Value(*node, target, depth + 1));
      b_->DefineRule(rule, body);
      return b_->Call(rule);
    }
    if (auto c = s.find("const"); c != s.end()) return Literals({*c}, s, where);
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) return Error(where + ".enum", "must be a non-empty array");
      std::vector<ojson> values(e->begin(), e->end());
      return Literals(values, s, where);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto a = s.find(key); a != s.end()) {
        if (!a->is_array() || a->empty()) {
          return Error(where + "." + key, "must be a non-empty array of schemas");
        }
        std::vector<Expr> options;
        for (size_t i = 0; i < a->size(); ++i) {
          TRACE_ASSIGN_OR_RETURN(
              Expr opt,
              Value((*a)[i], where + "." + key + "[" + std::to_string(i) + "]", depth + 1));
          options.push_back(opt);
        }
        return b_->Alt(std::move(options));
      }
    }
    if (auto a = s.find("allOf"); a != s.end()) {
      if (!a->is_array() || a->size() != 1) {
        if (options_.strict) {
          return Error(where + ".allOf", "only allOf with a single schema is supported");
        }
      } else {
        return Value((*a)[0], where + ".allOf[0]", depth + 1);
      }
    }
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const ojson& x : *t) {
          if (!x.is_string()) return Error(where + ".type", "must be a string or strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return Error(where + ".type", "must be a type name or a non-empty array of them");
      }
    } else {
      types = InferTypes(s);
    }
    if (IsTrue(s, "nullable") && std::find(types.begin(), types.end(), "null") == types.end() &&
        !types.empty()) {
      types.push_back("null");
    }
    if (types.empty()) return b_->Call(AnyValueRule());
    std::vector<Expr> options;
    for (const std::string& type : types) {
      TRACE_ASSIGN_OR_RETURN(Expr e, Typed(s, type, where, depth));
      options.push_back(e);
    }
    return b_->Alt(std::move(options));
  }

  static std::vector<std::string> InferTypes(const ojson& s) {
    for (const char* k : {"properties", "required", "additionalProperties"}) {
      if (s.contains(k)) return {"object"};
    }
    for (const char* k : {"items", "minItems", "maxItems"}) {
      if (s.contains(k)) return {"array"};
    }
    for (const char* k : {"minLength", "maxLength"}) {
      if (s.contains(k)) return {"string"};
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(k)) return {"number"};
    }
    return {};
  }

  // enum / const: the values written out (filtered by `type` when given).
  Result<Expr> Literals(const std::vector<ojson>& values, const ojson& s,
                        const std::string& where) {
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) types.push_back(t->get<std::string>());
      if (t->is_array()) {
        for (const ojson& x : *t) {
          if (x.is_string()) types.push_back(x.get<std::string>());
        }
      }
    }
    std::vector<Expr> options;
    std::set<std::string> seen;
    for (const ojson& v : values) {
      if (!types.empty() && !MatchesType(v, types)) continue;
      std::string text = Write(v);
      if (seen.insert(text).second) options.push_back(b_->Literal(text));
    }
    if (options.empty()) return Error(where, "no value of 'enum'/'const' has the schema's type");
    return b_->Alt(std::move(options));
  }

  static bool MatchesType(const ojson& v, const std::vector<std::string>& types) {
    for (const std::string& t : types) {
      if ((t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) ||
          (t == "null" && v.is_null()) || (t == "object" && v.is_object()) ||
          (t == "array" && v.is_array()) || (t == "number" && v.is_number()) ||
          (t == "integer" &&
           (v.is_number_integer() ||
            (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())))) {
        return true;
      }
    }
    return false;
  }

  // A JSON value in the output's formatting: json.dumps's separators, non-ASCII as is.
  static std::string Write(const ojson& v) {
    if (v.is_object()) {
      std::string out = "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        out += (first ? "" : ", ") + ojson(it.key()).dump() + ": " + Write(it.value());
        first = false;
      }
      return out + "}";
    }
    if (v.is_array()) {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Write(v[i]);
      return out + "]";
    }
    return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  static Result<std::optional<int64_t>> IntKeyword(const ojson& s, const char* key,
                                                   const std::string& where) {
    auto it = s.find(key);
    if (it == s.end() || it->is_null()) return std::optional<int64_t>();
    if (!it->is_number_integer() && !it->is_number_unsigned()) {
      return Located(where + "." + key, "must be a non-negative integer");
    }
    int64_t v =
        it->is_number_unsigned()
            ? static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), uint64_t{1} << 40))
            : it->get<int64_t>();
    if (v < 0) return Located(where + "." + key, "must be a non-negative integer");
    return std::optional<int64_t>(v);
  }

  // Numeric bounds: minimum/maximum and their exclusive forms (draft 6+ numbers, or draft 4
  // booleans next to minimum/maximum).
  struct Bounds {
    std::optional<double> lo, hi;
    bool lo_incl = true, hi_incl = true;
  };
  Result<Bounds> ReadBounds(const ojson& s, const std::string& where) {
    Bounds b;
    auto num = [&](const char* key, std::optional<double>* out) -> Status {
      auto it = s.find(key);
      if (it == s.end() || it->is_null() || it->is_boolean()) return Status::Ok();
      if (!it->is_number()) return Error(where + "." + key, "must be a number");
      *out = it->get<double>();
      return Status::Ok();
    };
    std::optional<double> xlo, xhi;
    TRACE_RETURN_IF_ERROR(num("minimum", &b.lo));
    TRACE_RETURN_IF_ERROR(num("maximum", &b.hi));
    TRACE_RETURN_IF_ERROR(num("exclusiveMinimum", &xlo));
    TRACE_RETURN_IF_ERROR(num("exclusiveMaximum", &xhi));
    if (IsTrue(s, "exclusiveMinimum")) b.lo_incl = false;
    if (IsTrue(s, "exclusiveMaximum")) b.hi_incl = false;
    if (xlo && (!b.lo || *xlo >= *b.lo)) b.lo = xlo, b.lo_incl = false;
    if (xhi && (!b.hi || *xhi <= *b.hi)) b.hi = xhi, b.hi_incl = false;
    return b;
  }

  Result<Expr> Typed(const ojson& s, const std::string& type, const std::string& where, int depth) {
    if (type == "null") return b_->Literal("null");
    if (type == "boolean") return b_->Alt({b_->Literal("true"), b_->Literal("false")});
    if (type == "string") {
      TRACE_ASSIGN_OR_RETURN(std::optional<int64_t> min, IntKeyword(s, "minLength", where));
      TRACE_ASSIGN_OR_RETURN(std::optional<int64_t> max, IntKeyword(s, "maxLength", where));
      if (min && max && *min > *max) return Error(where, "minLength is greater than maxLength");
      const int64_t cap = StringLexer::kMaxCount - 1;
      return b_->Call(b_->StringRule(static_cast<int32_t>(std::min(min.value_or(0), cap)),
                                     max ? static_cast<int32_t>(std::min(*max, cap)) : -1));
    }
    if (type == "integer") {
      TRACE_ASSIGN_OR_RETURN(Bounds bounds, ReadBounds(s, where));
      constexpr double kLimit = 9.2e18;
      std::optional<int64_t> lo, hi;
      if (bounds.lo && std::abs(*bounds.lo) < kLimit) {
        double v = std::ceil(*bounds.lo);
        lo = static_cast<int64_t>(v) + (!bounds.lo_incl && v == *bounds.lo ? 1 : 0);
      }
      if (bounds.hi && std::abs(*bounds.hi) < kLimit) {
        double v = std::floor(*bounds.hi);
        hi = static_cast<int64_t>(v) - (!bounds.hi_incl && v == *bounds.hi ? 1 : 0);
      }
      if (lo && hi && *lo > *hi) return Error(where, "no integer lies between its bounds");
      if (!lo && !hi) return AnyInteger(b_);
      return IntegerRange(b_, lo, hi);
    }
    if (type == "number") {
      TRACE_ASSIGN_OR_RETURN(Bounds bounds, ReadBounds(s, where));
      if (!bounds.lo && !bounds.hi) return AnyNumber(b_);
      auto whole = [](double v) { return std::floor(v) == v && std::abs(v) < 1e15; };
      if ((bounds.lo && !whole(*bounds.lo)) || (bounds.hi && !whole(*bounds.hi))) {
        if (options_.strict) {
          return Error(where, "bounds on a number must be whole numbers with strict: true");
        }
        return AnyNumber(b_);
      }
      std::optional<NumberBound> lo, hi;
      if (bounds.lo) lo = NumberBound{static_cast<int64_t>(*bounds.lo), bounds.lo_incl};
      if (bounds.hi) hi = NumberBound{static_cast<int64_t>(*bounds.hi), bounds.hi_incl};
      if (lo && hi &&
          (lo->value > hi->value ||
           (lo->value == hi->value && !(lo->inclusive && hi->inclusive)))) {
        return Error(where, "no number lies between its bounds");
      }
      return NumberRange(b_, lo, hi);
    }
    if (type == "array") return Array(s, where, depth);
    if (type == "object") return Object(s, where, depth);
    return Error(where + ".type", "unknown type \"" + EscapeForDisplay(type) +
                                      "\" (string, number, integer, boolean, object, array, null)");
  }

  Result<Expr> Array(const ojson& s, const std::string& where, int depth) {
    Expr item;
    auto items = s.find("items");
    if (items == s.end() || items->is_null() || (items->is_boolean() && items->get<bool>())) {
      item = b_->Call(AnyValueRule());
    } else if (items->is_array()) {
      return Error(where + ".items", "an array of item schemas (tuples) is not supported");
    } else {
      TRACE_ASSIGN_OR_RETURN(int32_t rule, RuleFor(*items, where + ".items"));
      item = b_->Call(rule);
    }
    TRACE_ASSIGN_OR_RETURN(std::optional<int64_t> min, IntKeyword(s, "minItems", where));
    TRACE_ASSIGN_OR_RETURN(std::optional<int64_t> max, IntKeyword(s, "maxItems", where));
    const int64_t lo = min.value_or(0);
    if (max && lo > *max) return Error(where, "minItems is greater than maxItems");
    constexpr int64_t kMaxUnrolled = 4096;
    if (lo > kMaxUnrolled || (max && *max > kMaxUnrolled)) {
      return Error(
          where, "minItems/maxItems above " + std::to_string(kMaxUnrolled) + " are not supported");
    }
    if (max && *max == 0) return b_->Literal("[]");
    Expr more = b_->Seq({b_->Literal(", "), item});
    const int32_t rest_min = static_cast<int32_t>(std::max<int64_t>(lo - 1, 0));
    const int32_t rest_max = max ? static_cast<int32_t>(*max - 1) : -1;
    Expr list = b_->Seq({item, b_->Repeat(more, rest_min, rest_max)});
    return b_->Seq({b_->Literal("["), lo == 0 ? b_->Opt(list) : list, b_->Literal("]")});
  }

  Result<Expr> Object(const ojson& s, const std::string& where, int depth) {
    std::vector<std::pair<std::string, const ojson*>> props;
    if (auto p = s.find("properties"); p != s.end() && !p->is_null()) {
      if (!p->is_object()) return Error(where + ".properties", "must be an object");
      for (auto it = p->begin(); it != p->end(); ++it) props.emplace_back(it.key(), &it.value());
    }
    std::set<std::string> required;
    if (auto r = s.find("required"); r != s.end() && !r->is_null()) {
      if (!r->is_array()) return Error(where + ".required", "must be an array of names");
      for (const ojson& n : *r) {
        if (!n.is_string()) return Error(where + ".required", "must be an array of names");
        required.insert(n.get<std::string>());
      }
    }
    // Additional properties: absent or false -> none.
    std::optional<Expr> extra_value;
    if (auto a = s.find("additionalProperties"); a != s.end() && !a->is_null()) {
      if (a->is_boolean()) {
        if (a->get<bool>()) extra_value = b_->Call(AnyValueRule());
      } else {
        TRACE_ASSIGN_OR_RETURN(int32_t rule, RuleFor(*a, where + ".additionalProperties"));
        extra_value = b_->Call(rule);
      }
    }
    std::set<std::string_view> declared;  // a set: `required` x `properties` was quadratic
    for (const auto& p : props) declared.insert(p.first);
    for (const std::string& name : required) {
      if (!declared.count(name) && !extra_value) {
        return Error(where + ".required", "\"" + EscapeForDisplay(name) +
                                              "\" is required but not in 'properties' (and "
                                              "additionalProperties is false)");
      }
    }
    if (props.empty() && !extra_value) return b_->Literal("{}");

    std::vector<Expr> members;  // "key": value, per declared property
    std::vector<bool> is_required;
    for (const auto& [name, schema] : props) {
      TRACE_ASSIGN_OR_RETURN(int32_t rule, RuleFor(*schema, where + ".properties." + name));
      members.push_back(b_->Seq({b_->Literal(ojson(name).dump() + ": "), b_->Call(rule)}));
      is_required.push_back(required.count(name) > 0);
    }
    // Extra members come after the declared ones (any key, as a JSON string).
    std::optional<Expr> extra_member;
    if (extra_value) {
      extra_member = b_->Seq({b_->Call(b_->StringRule(0, -1)), b_->Literal(": "), *extra_value});
    }
    // Properties in schema order; an optional one may be left out. rest[i]: members i.. after
    // something was written (each preceded by ", "); first[i]: the same when nothing was.
    const size_t n = members.size();
    std::vector<Expr> rest(n + 1), first(n + 1);
    const std::string base = where + "/members";
    if (extra_member) {
      Expr more = b_->Star(b_->Seq({b_->Literal(", "), *extra_member}));
      rest[n] = more;
      first[n] = b_->Opt(b_->Seq({*extra_member, more}));
    } else {
      rest[n] = b_->Empty();
      first[n] = b_->Empty();
    }
    for (size_t i = n; i-- > 0;) {
      // Shared tails become rules, so an object of many optional properties stays linear.
      int32_t rest_rule = b_->DeclareRule(base + ".rest" + std::to_string(i + 1));
      b_->DefineRule(rest_rule, rest[i + 1]);
      Expr after = b_->Call(rest_rule);
      Expr with = b_->Seq({b_->Literal(", "), members[i], after});
      rest[i] = is_required[i] ? with : b_->Alt({with, after});
      Expr start = b_->Seq({members[i], after});
      first[i] = is_required[i] ? start : b_->Alt({start, first[i + 1]});
    }
    return b_->Seq({b_->Literal("{"), first[0], b_->Literal("}")});
  }

  GrammarBuilder* b_;
  const ojson& root_;
  SchemaOptions options_;
  std::map<std::string, int32_t> refs_;
  int32_t any_value_ = -1;
  int32_t any_object_ = -1;
};

}  // namespace

Result<int32_t> AddJsonSchema(GrammarBuilder* builder, const ojson& schema,
                              const SchemaOptions& options) {
  Compiler c(builder, schema, options);
  TRACE_ASSIGN_OR_RETURN(int32_t rule, c.RuleFor(schema, options.where));
  builder->RequireFinite(rule, options.where,
                         "no finite JSON value is valid under this schema (its bounds "
                         "exclude every value, or it recurses through $ref with no way "
                         "to end)");
  return rule;
}

int32_t AddAnyJsonObject(GrammarBuilder* builder) {
  static const ojson kEmpty = ojson::object();
  Compiler c(builder, kEmpty, SchemaOptions());
  return c.AnyObjectRule();
}

Result<std::shared_ptr<const Grammar>> CompileJsonSchema(const ojson& schema,
                                                         const SchemaOptions& options) {
  GrammarBuilder b;
  TRACE_ASSIGN_OR_RETURN(int32_t root, AddJsonSchema(&b, schema, options));
  return b.Build(root);
}

}  // namespace trace::recorder::grammar
