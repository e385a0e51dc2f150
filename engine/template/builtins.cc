// jinja2's builtins as chat templates use them besides the filters (filters.cc): the tests
// (tests.py) and the globals (range, namespace, dict, and transformers' raise_exception and
// strftime_now), each a function in a table of its kind; and ToList, iteration as Python
// does it.
#include <ctime>
#include <string>

#include "base/escape.h"
#include "engine/template/py_string.h"
#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

// ---- globals -----------------------------------------------------------------------------

namespace {

using GlobalFn = Result<Value> (*)(Renderer& r, CallArgs& args);

Result<Value> RangeGlobal(Renderer&, CallArgs& a) {
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
}

// The entries of `a`'s dicts, then its keywords, into `d`; `fn` names the caller.
Status FillDict(Dict& d, const CallArgs& a, const char* fn) {
  for (const auto& v : a.positional) {
    if (!v.is_dict()) return TypeError(std::string(fn) + "() positional argument must be a dict");
    for (const auto& [k, x] : v.dict()->entries) d.Set(k, x);
  }
  for (const auto& [k, v] : a.keyword) d.Set(k, v);
  return Status::Ok();
}

Result<Value> NamespaceGlobal(Renderer& r, CallArgs& a) {
  auto d = std::make_shared<Dict>();
  r.TrackNamespace(d);
  TRACE_RETURN_IF_ERROR(FillDict(*d, a, "namespace"));
  return Value::MakeNamespace(d);
}

Result<Value> DictGlobal(Renderer&, CallArgs& a) {
  auto d = std::make_shared<Dict>();
  TRACE_RETURN_IF_ERROR(FillDict(*d, a, "dict"));
  return Value::MakeDict(d);
}

Result<Value> RaiseExceptionGlobal(Renderer&, CallArgs& a) {
  const Value* m = Arg(a, 0, "message");
  // The template's own message for the user: longer than a value, still bounded.
  return FailedPrecondition("raise_exception: " +
                            (m ? EscapeForDisplay(ToPyStr(*m), 4 * kDisplayLimit) : ""));
}

Result<Value> StrftimeNowGlobal(Renderer&, CallArgs& a) {
  const Value* f = Arg(a, 0, "format");
  if (!f || !f->is_string()) return TypeError("strftime_now() needs a format string");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof(buf), f->str().c_str(), &tm);
  return Value::Str(std::string(buf, n));
}

const NameTable<GlobalFn>& Globals() {
  static const NameTable<GlobalFn> kGlobals = {
      {"range", RangeGlobal},
      {"namespace", NamespaceGlobal},
      {"dict", DictGlobal},
      {"raise_exception", RaiseExceptionGlobal},
      {"strftime_now", StrftimeNowGlobal},
  };
  return kGlobals;
}

}  // namespace

Value Renderer::Builtin(const std::string& name) const {
  GlobalFn global = Globals().Find(name);
  if (!global) return Value();
  auto fn = std::make_shared<Callable>();
  fn->name = name;
  fn->fn = global;
  return Value::MakeCallable(fn);
}

// ---- iteration ------------------------------------------------------------------------------

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

// ---- tests -----------------------------------------------------------------------------------
//
// Each is a TestFn (renderer.h): the name the template called it by, the value and the
// arguments.

namespace {

Result<bool> DefinedTest(const std::string&, const Value& v, CallArgs&) {
  return !v.is_undefined();
}

Result<bool> UndefinedTest(const std::string&, const Value& v, CallArgs&) {
  return v.is_undefined();
}

Result<bool> NoneTest(const std::string&, const Value& v, CallArgs&) {
  return v.is_none();
}

Result<bool> StringTest(const std::string&, const Value& v, CallArgs&) {
  return v.is_string();
}

Result<bool> MappingTest(const std::string&, const Value& v, CallArgs&) {
  return v.is_dict();
}

// iterable, sequence.
Result<bool> IterableTest(const std::string&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}

Result<bool> NumberTest(const std::string&, const Value& v, CallArgs&) {
  return v.is_number();
}

Result<bool> IntegerTest(const std::string&, const Value& v, CallArgs&) {
  return v.kind() == Kind::kInt;
}

Result<bool> FloatTest(const std::string&, const Value& v, CallArgs&) {
  return v.kind() == Kind::kFloat;
}

Result<bool> BooleanTest(const std::string&, const Value& v, CallArgs&) {
  return v.kind() == Kind::kBool;
}

Result<bool> TrueTest(const std::string&, const Value& v, CallArgs&) {
  return v.kind() == Kind::kBool && v.as_bool();
}

Result<bool> FalseTest(const std::string&, const Value& v, CallArgs&) {
  return v.kind() == Kind::kBool && !v.as_bool();
}

Result<bool> CallableTest(const std::string&, const Value& v, CallArgs&) {
  return v.kind() == Kind::kCallable;
}

// lower and upper: str.islower() / str.isupper() of a string; false for anything else.
Result<bool> StrPredicate(const Value& v, const std::string& method) {
  if (!v.is_string()) return false;
  CallArgs none;
  TRACE_ASSIGN_OR_RETURN(Value r, CallStrMethod(v.str(), method, none));
  return r.as_bool();
}

Result<bool> LowerTest(const std::string&, const Value& v, CallArgs&) {
  return StrPredicate(v, "islower");
}

Result<bool> UpperTest(const std::string&, const Value& v, CallArgs&) {
  return StrPredicate(v, "isupper");
}

Status NeedInteger(const std::string& name, const Value& v) {
  if (v.is_integral()) return Status::Ok();
  return TypeError("test " + Quote(name) + " needs an integer, got " + KindName(v));
}

Result<bool> OddTest(const std::string& name, const Value& v, CallArgs&) {
  TRACE_RETURN_IF_ERROR(NeedInteger(name, v));
  return v.as_int() % 2 != 0;
}

Result<bool> EvenTest(const std::string& name, const Value& v, CallArgs&) {
  TRACE_RETURN_IF_ERROR(NeedInteger(name, v));
  return v.as_int() % 2 == 0;
}

Result<bool> DivisiblebyTest(const std::string& name, const Value& v, CallArgs& args) {
  TRACE_RETURN_IF_ERROR(NeedInteger(name, v));
  const Value* num = Arg(args, 0, "num");
  if (!num || !num->is_integral() || num->as_int() == 0) {
    return TypeError("divisibleby needs a non-zero integer");
  }
  return v.as_int() % num->as_int() == 0;
}

// The value a comparison test compares with (`other`).
Result<const Value*> Other(const std::string& name, CallArgs& args) {
  const Value* arg = Arg(args, 0, "other");
  if (!arg) return TypeError("test " + Quote(name) + " needs an argument");
  return arg;
}

// eq, equalto, ==.
Result<bool> EqTest(const std::string& name, const Value& v, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(const Value* other, Other(name, args));
  return PyEquals(v, *other);
}

// ne, !=.
Result<bool> NeTest(const std::string& name, const Value& v, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(const Value* other, Other(name, args));
  return !PyEquals(v, *other);
}

Result<bool> SameasTest(const std::string& name, const Value& v, CallArgs& args) {
  TRACE_ASSIGN_OR_RETURN(const Value* other, Other(name, args));
  if (v.kind() != other->kind()) return false;
  if (v.is_none() || v.kind() == Kind::kBool) return PyEquals(v, *other);
  if (v.is_list()) return v.list_ptr() == other->list_ptr();
  if (v.is_dict() || v.kind() == Kind::kNamespace) return v.dict() == other->dict();
  return false;
}

// lt, le, gt, ge: `v op other` as the operator computes it.
Result<bool> Ordered(const std::string& name, const Value& v, CallArgs& args,
                     const std::string& op) {
  TRACE_ASSIGN_OR_RETURN(const Value* other, Other(name, args));
  TRACE_ASSIGN_OR_RETURN(Value r, Renderer::Binary(op, v, *other));
  return r.as_bool();
}

// lt, lessthan.
Result<bool> LtTest(const std::string& name, const Value& v, CallArgs& args) {
  return Ordered(name, v, args, "<");
}

Result<bool> LeTest(const std::string& name, const Value& v, CallArgs& args) {
  return Ordered(name, v, args, "<=");
}

// gt, greaterthan.
Result<bool> GtTest(const std::string& name, const Value& v, CallArgs& args) {
  return Ordered(name, v, args, ">");
}

Result<bool> GeTest(const std::string& name, const Value& v, CallArgs& args) {
  return Ordered(name, v, args, ">=");
}

Result<bool> InTest(const std::string&, const Value& v, CallArgs& args) {
  const Value* seq = Arg(args, 0, "seq");
  if (!seq) return TypeError("test 'in' needs a sequence");
  return Renderer::Contains(*seq, v);
}

// Every test, by every name it has: the one list of them.
const NameTable<TestFn>& Tests() {
  static const NameTable<TestFn> kTests = {
      {"defined", DefinedTest},
      {"undefined", UndefinedTest},
      {"none", NoneTest},
      {"string", StringTest},
      {"mapping", MappingTest},
      {"iterable", IterableTest},
      {"sequence", IterableTest},
      {"number", NumberTest},
      {"integer", IntegerTest},
      {"float", FloatTest},
      {"boolean", BooleanTest},
      {"true", TrueTest},
      {"false", FalseTest},
      {"callable", CallableTest},
      {"lower", LowerTest},
      {"upper", UpperTest},
      {"odd", OddTest},
      {"even", EvenTest},
      {"divisibleby", DivisiblebyTest},
      {"eq", EqTest},
      {"equalto", EqTest},
      {"==", EqTest},
      {"ne", NeTest},
      {"!=", NeTest},
      {"sameas", SameasTest},
      {"lt", LtTest},
      {"lessthan", LtTest},
      {"le", LeTest},
      {"gt", GtTest},
      {"greaterthan", GtTest},
      {"ge", GeTest},
      {"in", InTest},
  };
  return kTests;
}

}  // namespace

TestFn FindTest(std::string_view name) {
  return Tests().Find(name);
}

Status UnknownTest(const std::string& name) {
  return Unsupported("unsupported construct: test " + Quote(name));
}

Result<bool> Renderer::ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
  TestFn fn = FindTest(name);
  if (!fn) return UnknownTest(name);
  return fn(name, v, args);
}

}  // namespace trace::engine::tmpl
