// Template evaluator: the Renderer's statements and expressions, following jinja2 3.1
// (runtime.py: loops, macros, the default Undefined; sandbox.py: attribute and item access),
// the check that a program names only supported filters and tests, and the entry point.
// The filters, tests and globals are in builtins.cc, Python's str/dict/list methods in
// methods.cc, Python's string algorithms in py_string.cc.
#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <string>

#include "base/escape.h"
#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

// ---- helpers shared with builtins.cc and methods.cc (renderer.h) -----------------------

Status TypeError(std::string m) {
  return InvalidArgument(std::move(m));
}

// Python has big ints; we have int64 and say so instead of wrapping around.
Status IntTooLarge() {
  return Unsupported("unsupported construct: integer result outside 64 bits (Python big int)");
}
Status TooLarge(const std::string& what) {
  return InvalidArgument(what + " would be larger than " + std::to_string(kMaxBuiltSize) +
                         " bytes");
}

// A value in a message: quoted, escaped and clipped (base/escape.h).
std::string Quote(const std::string& s) {
  std::string quoted = "'";
  quoted.append(EscapeForDisplay(s)).push_back('\'');
  return quoted;
}

// Positional argument `index` or keyword `name`, else nullptr.
const Value* Arg(const CallArgs& args, size_t index, std::string_view name) {
  if (index < args.positional.size()) return &args.positional[index];
  return args.Keyword(name);
}

// ---- small helpers -------------------------------------------------------------------

namespace {

// Nesting limits standing in for Python's recursion limit.
constexpr int kMaxCallDepth = 256;

// jinja2's object description in "has no attribute" messages: 'dict object'.
std::string ObjectName(const Value& v) {
  return std::string(KindName(v)) + " object";
}

Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.str();
  return InvalidArgument(hint.empty() ? "value is undefined" : hint);
}

// Python's sequence index normalisation: -1 is the last element.
bool NormalizeIndex(int64_t* index, size_t size) {
  if (*index < 0) *index += static_cast<int64_t>(size);
  return *index >= 0 && *index < static_cast<int64_t>(size);
}

// Python slice semantics (PySlice_AdjustIndices).
std::vector<size_t> SliceIndices(size_t size, const Value& start_v, const Value& stop_v,
                                 const Value& step_v, Status* status) {
  std::vector<size_t> out;
  int64_t n = static_cast<int64_t>(size);
  int64_t step = 1;
  if (!step_v.is_none() && !step_v.is_undefined()) {
    if (!step_v.is_integral()) {
      *status = TypeError("slice indices must be integers or None");
      return out;
    }
    step = step_v.as_int();
    if (step == 0) {
      *status = InvalidArgument("slice step cannot be zero");
      return out;
    }
  }
  auto get = [&](const Value& v, int64_t dflt, bool* ok) -> int64_t {
    if (v.is_none() || v.is_undefined()) return dflt;
    if (!v.is_integral()) {
      *ok = false;
      return 0;
    }
    return v.as_int();
  };
  bool ok = true;
  int64_t start = get(start_v, step < 0 ? n - 1 : 0, &ok);
  int64_t stop = get(stop_v, step < 0 ? -n - 1 : n, &ok);
  if (!ok) {
    *status = TypeError("slice indices must be integers or None");
    return out;
  }
  auto adjust = [&](int64_t v, bool is_start) {
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    (void)is_start;
    return v;
  };
  if (!start_v.is_none() && !start_v.is_undefined()) start = adjust(start, true);
  if (!stop_v.is_none() && !stop_v.is_undefined()) {
    stop = adjust(stop, false);
  } else if (step < 0) {
    stop = -1;
  }
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) out.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = start; i > stop; i += step) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

const std::set<std::string>& DictMethods() {
  static const std::set<std::string> k = {"clear",      "copy",   "fromkeys", "get",
                                          "items",      "keys",   "pop",      "popitem",
                                          "setdefault", "update", "values"};
  return k;
}
const std::set<std::string>& StrMethods() {
  static const std::set<std::string> k = {
      "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
      "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
      "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
      "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
      "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
      "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
      "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
      "swapcase",     "title",       "translate", "upper",      "zfill"};
  return k;
}
const std::set<std::string>& ListMethods() {
  static const std::set<std::string> k = {"append", "clear", "copy",   "count",   "extend", "index",
                                          "insert", "pop",   "remove", "reverse", "sort"};
  return k;
}

}  // namespace

// ---- the renderer ----------------------------------------------------------------------

Renderer::Renderer(const Program& program, std::shared_ptr<Dict> globals) : program_(program) {
  frame_ = std::make_shared<Frame>();
  globals_ = std::move(globals);
}

// A macro holds its defining frame (its closure), and that frame holds the macro: a
// reference cycle that would keep the frame, and every value in it (the messages of the
// conversation among them), alive after the render. Nothing calls a macro after its
// render, so dropping each macro's function here breaks every such cycle.
Renderer::~Renderer() {
  for (const auto& made : macros_) {
    if (auto fn = made.lock()) fn->fn = nullptr;
  }
}

Result<std::string> Renderer::Run() {
  std::string out;
  TRACE_RETURN_IF_ERROR(ExecBody(program_.body, out));
  return out;
}

Status Renderer::Err(int line, const std::string& what) const {
  return InvalidArgument("template " + program_.origin + " line " + std::to_string(line) + ": " +
                         what);
}

// Adds the template location to an error from a filter, test, method or callee.
Status Renderer::Locate(const Status& st, int line) const {
  if (st.message().rfind("template ", 0) == 0) return st;
  return Status(st.code(), "template " + program_.origin + " line " + std::to_string(line) + ": " +
                               st.message());
}

// ---- statements ----

Status Renderer::ExecBody(const Body& body, std::string& out) {
  for (const auto& stmt : body) {
    TRACE_RETURN_IF_ERROR(Exec(*stmt, out));
    if (flow_ != Flow::kNormal) return Status::Ok();
  }
  return Status::Ok();
}

Status Renderer::Exec(const Stmt& s, std::string& out) {
  switch (s.kind) {
    case StmtKind::kText:
      out += s.text;
      return Status::Ok();
    case StmtKind::kOutput: {
      TRACE_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      out += ToPyStr(v);
      return Status::Ok();
    }
    case StmtKind::kIf: {
      for (const auto& [cond, body] : s.branches) {
        TRACE_ASSIGN_OR_RETURN(Value c, Eval(*cond));
        if (c.Truthy()) return ExecBody(body, out);
      }
      return ExecBody(s.else_body, out);
    }
    case StmtKind::kFor:
      return ExecFor(s, out);
    case StmtKind::kSet:
      return ExecSet(s);
    case StmtKind::kMacro: {
      frame_->vars.Set(s.text, MakeMacro(s));
      return Status::Ok();
    }
    case StmtKind::kCallBlock: {
      Value caller = MakeMacro(s, "caller");
      const Expr& call = *s.expr;
      TRACE_ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0]));
      TRACE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call));
      args.keyword.emplace_back("caller", caller);
      TRACE_ASSIGN_OR_RETURN(Value result, CallValue(callee, args, call.line));
      out += ToPyStr(result);
      return Status::Ok();
    }
    case StmtKind::kFilterBlock: {
      std::string inner;
      TRACE_RETURN_IF_ERROR(ExecBody(s.body, inner));
      TRACE_ASSIGN_OR_RETURN(Value v, EvalWithBlock(*s.expr, std::move(inner)));
      out += ToPyStr(v);
      return Status::Ok();
    }
    case StmtKind::kBreak:
      if (loop_depth_ == 0) return Err(s.line, "'break' outside of a loop");
      flow_ = Flow::kBreak;
      return Status::Ok();
    case StmtKind::kContinue:
      if (loop_depth_ == 0) return Err(s.line, "'continue' outside of a loop");
      flow_ = Flow::kContinue;
      return Status::Ok();
    case StmtKind::kTransparent:
      return ExecBody(s.body, out);
  }
  return Err(s.line, "unknown statement");
}

Result<Value> Renderer::EvalWithBlock(const Expr& filter_chain, std::string text) {
  auto saved = frame_;
  frame_ = std::make_shared<Frame>();
  frame_->parent = saved;
  frame_->vars.Set(" block ", Value::Str(std::move(text)));
  auto r = Eval(filter_chain);
  frame_ = saved;
  return r;
}

Status Renderer::Assign(const std::vector<std::string>& targets, const Value& v, Dict& vars,
                        int line) {
  if (targets.size() == 1) {
    vars.Set(targets[0], v);
    return Status::Ok();
  }
  std::vector<Value> items;
  if (v.is_list()) {
    items = v.items();
  } else if (v.is_string()) {
    for (char32_t c : DecodeUtf8(v.str())) {
      std::string one;
      AppendUtf8(one, c);
      items.push_back(Value::Str(one));
    }
  } else if (v.is_dict()) {
    for (const auto& [k, val] : v.dict()->entries) items.push_back(Value::Str(k));
  } else {
    return Err(line, std::string("cannot unpack non-iterable ") + KindName(v) + " object");
  }
  if (items.size() != targets.size()) {
    return Err(line,
               items.size() > targets.size()
                   ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                   : "not enough values to unpack (expected " + std::to_string(targets.size()) +
                         ", got " + std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) vars.Set(targets[i], items[i]);
  return Status::Ok();
}

Status Renderer::ExecSet(const Stmt& s) {
  Value v;
  if (s.expr && s.body.empty() && !(s.expr->kind == ExprKind::kFilter && HasBlockName(*s.expr))) {
    TRACE_ASSIGN_OR_RETURN(v, Eval(*s.expr));
  } else {
    std::string text;
    TRACE_RETURN_IF_ERROR(ExecBody(s.body, text));
    if (s.expr) {
      TRACE_ASSIGN_OR_RETURN(v, EvalWithBlock(*s.expr, std::move(text)));
    } else {
      v = Value::Str(std::move(text));
    }
  }
  if (s.attr_target) {
    Value ns = Lookup(s.targets[0]);
    if (ns.kind() != Kind::kNamespace) {
      return Err(s.line, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
    }
    ns.dict()->Set(s.targets[1], v);
    return Status::Ok();
  }
  return Assign(s.targets, v, frame_->vars, s.line);
}

bool Renderer::HasBlockName(const Expr& e) {
  if (e.kind == ExprKind::kName) return e.name == " block ";
  return !e.children.empty() && e.children[0] && HasBlockName(*e.children[0]);
}

Status Renderer::ExecFor(const Stmt& s, std::string& out) {
  TRACE_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr));
  auto iterated = ToList(seq);
  if (!iterated.ok()) return Locate(iterated.status(), s.line);
  std::vector<Value> items = std::move(iterated).value();
  auto outer = frame_;
  if (s.filter) {
    std::vector<Value> kept;
    for (const auto& item : items) {
      frame_ = std::make_shared<Frame>();
      frame_->parent = outer;
      Status st = Assign(s.targets, item, frame_->vars, s.line);
      if (!st.ok()) {
        frame_ = outer;
        return st;
      }
      auto keep = Eval(*s.filter);
      frame_ = outer;
      if (!keep.ok()) return keep.status();
      if (keep->Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return ExecBody(s.else_body, out);
  ++loop_depth_;
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    frame_ = std::make_shared<Frame>();
    frame_->parent = outer;
    auto loop = std::make_shared<Dict>();
    loop->Set("index", Value::Int(static_cast<int64_t>(i + 1)));
    loop->Set("index0", Value::Int(static_cast<int64_t>(i)));
    loop->Set("revindex", Value::Int(static_cast<int64_t>(n - i)));
    loop->Set("revindex0", Value::Int(static_cast<int64_t>(n - i - 1)));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(i + 1 == n));
    loop->Set("length", Value::Int(static_cast<int64_t>(n)));
    loop->Set("depth", Value::Int(1));
    loop->Set("depth0", Value::Int(0));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop->Set("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    auto cycle = std::make_shared<Callable>();
    cycle->name = "loop.cycle";
    cycle->fn = [i](Renderer&, CallArgs& args) -> Result<Value> {
      if (args.positional.empty()) return TypeError("no items for cycling given");
      return args.positional[i % args.positional.size()];
    };
    loop->Set("cycle", Value::MakeCallable(cycle));
    frame_->vars.Set("loop", Value::MakeDict(loop));
    Status st = Assign(s.targets, items[i], frame_->vars, s.line);
    if (st.ok()) st = ExecBody(s.body, out);
    frame_ = outer;
    if (!st.ok()) {
      --loop_depth_;
      return st;
    }
    Flow f = flow_;
    flow_ = Flow::kNormal;
    if (f == Flow::kBreak) break;
  }
  --loop_depth_;
  return Status::Ok();
}

Value Renderer::MakeMacro(const Stmt& s, std::string name) {
  auto fn = std::make_shared<Callable>();
  fn->name = name.empty() ? s.text : name;
  std::shared_ptr<Frame> closure = frame_;
  const Stmt* stmt = &s;
  fn->fn = [stmt, closure, macro_name = fn->name](Renderer& r, CallArgs& args) -> Result<Value> {
    if (args.positional.size() > stmt->params.size()) {
      return TypeError("macro '" + macro_name + "' takes not more than " +
                       std::to_string(stmt->params.size()) + " argument(s)");
    }
    if (r.call_depth_ >= kMaxCallDepth) {
      return InvalidArgument("maximum recursion depth exceeded calling macro '" + macro_name + "'");
    }
    ++r.call_depth_;
    auto saved = r.frame_;
    r.frame_ = std::make_shared<Frame>();
    r.frame_->parent = closure;
    Status st;
    for (size_t i = 0; i < stmt->params.size() && st.ok(); ++i) {
      const std::string& p = stmt->params[i];
      if (i < args.positional.size()) {
        r.frame_->vars.Set(p, args.positional[i]);
      } else if (const Value* kw = args.Keyword(p)) {
        r.frame_->vars.Set(p, *kw);
      } else if (stmt->defaults[i]) {
        auto d = r.Eval(*stmt->defaults[i]);
        if (!d.ok()) {
          st = d.status();
        } else {
          r.frame_->vars.Set(p, *d);
        }
      } else {
        r.frame_->vars.Set(p, Value::Undefined("parameter '" + p + "' was not provided"));
      }
    }
    for (const auto& [k, v] : args.keyword) {
      if (!st.ok()) break;
      bool known = std::find(stmt->params.begin(), stmt->params.end(), k) != stmt->params.end();
      if (k == "caller") {
        r.frame_->vars.Set(k, v);
      } else if (!known) {
        st = TypeError("macro '" + macro_name + "' takes no keyword argument '" + k + "'");
      }
    }
    std::string out;
    int saved_depth = r.loop_depth_;
    r.loop_depth_ = 0;
    if (st.ok()) st = r.ExecBody(stmt->body, out);
    r.loop_depth_ = saved_depth;
    r.frame_ = saved;
    --r.call_depth_;
    if (!st.ok()) return st;
    return Value::Str(std::move(out));
  };
  macros_.push_back(fn);
  return Value::MakeCallable(fn);
}

// ---- expressions ----

Value Renderer::Lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f; f = f->parent.get()) {
    if (const Value* v = f->vars.Find(name)) return *v;
  }
  if (const Value* v = globals_->Find(name)) return *v;
  if (Value b = Builtin(name); !b.is_undefined()) return b;
  return Value::Undefined(Quote(name) + " is undefined");
}

Result<CallArgs> Renderer::EvalArgs(const Expr& e) {
  CallArgs args;
  for (const auto& a : e.args) {
    TRACE_ASSIGN_OR_RETURN(Value v, Eval(*a));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [k, a] : e.kwargs) {
    TRACE_ASSIGN_OR_RETURN(Value v, Eval(*a));
    args.keyword.emplace_back(k, std::move(v));
  }
  return args;
}

Result<Value> Renderer::CallValue(const Value& callee, CallArgs& args, int line) {
  if (callee.is_undefined()) return Locate(UndefinedError(callee), line);
  if (callee.kind() != Kind::kCallable) {
    return Err(line, Quote(KindName(callee)) + " object is not callable");
  }
  auto r = callee.callable()->fn(*this, args);
  if (!r.ok()) return Locate(r.status(), line);
  return r;
}

Result<Value> Renderer::Eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.value;
    case ExprKind::kName:
      return Lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const auto& c : e.children) {
        TRACE_ASSIGN_OR_RETURN(Value v, Eval(*c));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        TRACE_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i]));
        TRACE_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1]));
        if (!k.is_string()) {
          return Err(e.line, std::string("unsupported construct: dict key of type ") + KindName(k) +
                                 " (only string keys are supported)");
        }
        d->Set(k.str(), std::move(v));
      }
      return Value::MakeDict(std::move(d));
    }
    case ExprKind::kGetAttr: {
      TRACE_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
      auto r = GetAttr(obj, e.name);
      if (!r.ok()) return Locate(r.status(), e.line);
      return r;
    }
    case ExprKind::kGetItem: {
      TRACE_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
      TRACE_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
      auto r = GetItem(obj, key);
      if (!r.ok()) return Locate(r.status(), e.line);
      return r;
    }
    case ExprKind::kSlice: {
      TRACE_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
      Value parts[3] = {Value::None(), Value::None(), Value::None()};
      for (int i = 0; i < 3; ++i) {
        if (e.children[i + 1]) {
          TRACE_ASSIGN_OR_RETURN(parts[i], Eval(*e.children[i + 1]));
        }
      }
      auto r = Slice(obj, parts[0], parts[1], parts[2]);
      if (!r.ok()) return Locate(r.status(), e.line);
      return r;
    }
    case ExprKind::kCall: {
      TRACE_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0]));
      TRACE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      return CallValue(callee, args, e.line);
    }
    case ExprKind::kFilter: {
      TRACE_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      TRACE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      auto r = ApplyFilter(e.name, v, args);
      if (!r.ok()) return Locate(r.status(), e.line);
      return r;
    }
    case ExprKind::kTest: {
      TRACE_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      TRACE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      auto r = ApplyTest(e.name, v, args);
      if (!r.ok()) return Locate(r.status(), e.line);
      return Value::Bool(*r != e.negated);
    }
    case ExprKind::kUnary: {
      TRACE_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      if (e.name == "not") return Value::Bool(!v.Truthy());
      if (v.is_undefined()) return Locate(UndefinedError(v), e.line);
      if (!v.is_number()) {
        return Err(e.line, "bad operand type for unary " + e.name + ": " + Quote(KindName(v)));
      }
      if (e.name == "+") return v.kind() == Kind::kBool ? Value::Int(v.as_int()) : v;
      if (v.kind() == Kind::kFloat) return Value::Float(-v.as_double());
      if (v.as_int() == INT64_MIN) return Locate(IntTooLarge(), e.line);
      return Value::Int(-v.as_int());
    }
    case ExprKind::kAnd: {
      TRACE_ASSIGN_OR_RETURN(Value l, Eval(*e.children[0]));
      if (!l.Truthy()) return l;
      return Eval(*e.children[1]);
    }
    case ExprKind::kOr: {
      TRACE_ASSIGN_OR_RETURN(Value l, Eval(*e.children[0]));
      if (l.Truthy()) return l;
      return Eval(*e.children[1]);
    }
    case ExprKind::kCondExpr: {
      TRACE_ASSIGN_OR_RETURN(Value c, Eval(*e.children[0]));
      if (c.Truthy()) return Eval(*e.children[1]);
      if (e.children[2]) return Eval(*e.children[2]);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::kBinary: {
      TRACE_ASSIGN_OR_RETURN(Value l, Eval(*e.children[0]));
      TRACE_ASSIGN_OR_RETURN(Value r, Eval(*e.children[1]));
      auto res = Binary(e.name, l, r);
      if (!res.ok()) return Locate(res.status(), e.line);
      return res;
    }
  }
  return Err(e.line, "unknown expression");
}

// ---- operators ----

Result<Value> Renderer::Binary(const std::string& op, const Value& l, const Value& r) {
  if (op == "~") {
    return Value::Str(ToPyStr(l) + ToPyStr(r));
  }
  if (op == "==") return Value::Bool(PyEquals(l, r));
  if (op == "!=") return Value::Bool(!PyEquals(l, r));
  if (op == "in" || op == "not in") {
    TRACE_ASSIGN_OR_RETURN(bool in, Contains(r, l));
    return Value::Bool(op == "in" ? in : !in);
  }
  if (l.is_undefined()) return UndefinedError(l);
  if (r.is_undefined()) return UndefinedError(r);
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    TRACE_ASSIGN_OR_RETURN(int c, Compare(l, r, op));
    if (op == "<") return Value::Bool(c < 0);
    if (op == ">") return Value::Bool(c > 0);
    if (op == "<=") return Value::Bool(c <= 0);
    return Value::Bool(c >= 0);
  }
  auto unsupported = [&]() {
    return TypeError("unsupported operand type(s) for " + op + ": " + Quote(KindName(l)) + " and " +
                     Quote(KindName(r)));
  };
  if (l.is_number() && r.is_number()) {
    bool ints = l.is_integral() && r.is_integral();
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t out;
      bool overflow = op == "+"   ? __builtin_add_overflow(l.as_int(), r.as_int(), &out)
                      : op == "-" ? __builtin_sub_overflow(l.as_int(), r.as_int(), &out)
                                  : __builtin_mul_overflow(l.as_int(), r.as_int(), &out);
      if (overflow) return IntTooLarge();
      return Value::Int(out);
    }
    if (op == "+") return Value::Float(l.as_double() + r.as_double());
    if (op == "-") return Value::Float(l.as_double() - r.as_double());
    if (op == "*") return Value::Float(l.as_double() * r.as_double());
    if (op == "/") {
      if (r.as_double() == 0) return InvalidArgument("division by zero");
      return Value::Float(l.as_double() / r.as_double());
    }
    if (op == "//" || op == "%") {
      if (ints) {
        int64_t a = l.as_int(), b = r.as_int();
        if (b == 0) return InvalidArgument("integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) return IntTooLarge();
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return Value::Int(op == "//" ? q : m);
      }
      // CPython's float_divmod.
      double a = l.as_double(), b = r.as_double();
      if (b == 0) return InvalidArgument("float division or modulo by zero");
      double m = std::fmod(a, b);
      double div = (a - m) / b;
      if (m != 0) {
        if ((b < 0) != (m < 0)) {
          m += b;
          div -= 1.0;
        }
      } else {
        m = std::copysign(0.0, b);
      }
      if (op == "%") return Value::Float(m);
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, a / b);
      }
      return Value::Float(floordiv);
    }
    if (op == "**") {
      if (ints && r.as_int() >= 0) {
        int64_t result = 1, base = l.as_int(), e = r.as_int();
        while (e > 0) {  // exponentiation by squaring, refusing to overflow
          if ((e & 1) && __builtin_mul_overflow(result, base, &result)) return IntTooLarge();
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) return IntTooLarge();
        }
        return Value::Int(result);
      }
      return Value::Float(std::pow(l.as_double(), r.as_double()));
    }
    return unsupported();
  }
  if (op == "+") {
    if (l.is_string() && r.is_string()) return Value::Str(l.str() + r.str());
    if (l.is_list() && r.is_list() && l.is_tuple() == r.is_tuple()) {
      std::vector<Value> items = l.items();
      items.insert(items.end(), r.items().begin(), r.items().end());
      return Value::MakeList(std::move(items), l.is_tuple());
    }
    if (l.is_string() || l.is_list()) {
      return TypeError("can only concatenate " + std::string(KindName(l)) + " (not \"" +
                       KindName(r) + "\") to " + KindName(l));
    }
    return unsupported();
  }
  if (op == "*") {
    const Value* seq = l.is_integral() ? &r : &l;
    const Value* count = l.is_integral() ? &l : &r;
    if (count->is_integral() && (seq->is_string() || seq->is_list())) {
      int64_t n = std::max<int64_t>(0, count->as_int());
      size_t unit = seq->is_string() ? seq->str().size() : seq->items().size() * sizeof(Value);
      // An empty sequence repeated is empty whatever the count: `"" * 2**55` looped 2^55
      // times, a hang (template_fuzz). The size check below bounds the loop otherwise.
      if (unit == 0) n = 0;
      if (unit > 0 && static_cast<uint64_t>(n) > kMaxBuiltSize / unit) {
        return TooLarge("repetition result");
      }
      if (seq->is_string()) {
        std::string out;
        out.reserve(static_cast<size_t>(n) * unit);
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return Value::Str(std::move(out));
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) {
        items.insert(items.end(), seq->items().begin(), seq->items().end());
      }
      return Value::MakeList(std::move(items), seq->is_tuple());
    }
  }
  if (op == "%" && l.is_string()) {
    return Unsupported("unsupported construct: printf-style string formatting with '%'");
  }
  return unsupported();
}

Result<int> Renderer::Compare(const Value& l, const Value& r, const std::string& op) {
  if (l.is_number() && r.is_number()) {
    if (l.is_integral() && r.is_integral()) {
      return l.as_int() < r.as_int() ? -1 : l.as_int() > r.as_int() ? 1 : 0;
    }
    double a = l.as_double(), b = r.as_double();
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (l.is_string() && r.is_string()) {
    int c = l.str().compare(r.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (l.is_list() && r.is_list()) {
    const auto& a = l.items();
    const auto& b = r.items();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (PyEquals(a[i], b[i])) continue;
      return Compare(a[i], b[i], op);
    }
    return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
  }
  return TypeError(Quote(op) + " not supported between instances of " + Quote(KindName(l)) +
                   " and " + Quote(KindName(r)));
}

Result<bool> Renderer::Contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!needle.is_string()) {
        return TypeError("'in <string>' requires string as left operand, not " +
                         std::string(KindName(needle)));
      }
      return container.str().find(needle.str()) != std::string::npos;
    case Kind::kList:
      for (const auto& item : container.items()) {
        if (PyEquals(item, needle)) return true;
      }
      return false;
    case Kind::kDict:
      return needle.is_string() && container.dict()->Find(needle.str()) != nullptr;
    default:
      return TypeError("argument of type " + Quote(KindName(container)) + " is not iterable");
  }
}

// ---- attribute / item access (jinja2 sandbox getattr / getitem) ----

Result<Value> Renderer::GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      return UndefinedError(obj);
    case Kind::kDict:
      if (DictMethods().count(name)) return BoundMethod(obj, name);
      if (const Value* v = obj.dict()->Find(name)) return *v;
      break;
    case Kind::kNamespace:
      if (const Value* v = obj.dict()->Find(name)) return *v;
      break;
    case Kind::kString:
      if (StrMethods().count(name)) return BoundMethod(obj, name);
      break;
    case Kind::kList:
      if (ListMethods().count(name)) return BoundMethod(obj, name);
      break;
    default:
      break;
  }
  return Value::Undefined(Quote(ObjectName(obj)) + " has no attribute " + Quote(name));
}

Result<Value> Renderer::GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      return UndefinedError(obj);
    case Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = obj.dict()->Find(key.str())) return *v;
        if (DictMethods().count(key.str())) return BoundMethod(obj, key.str());
      }
      break;
    case Kind::kNamespace:
      if (key.is_string()) return GetAttr(obj, key.str());
      break;
    case Kind::kList:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (NormalizeIndex(&i, obj.items().size())) return obj.items()[i];
      } else if (key.is_string()) {
        return GetAttr(obj, key.str());
      }
      break;
    case Kind::kString:
      if (key.is_integral()) {
        auto cps = DecodeUtf8(obj.str());
        int64_t i = key.as_int();
        if (NormalizeIndex(&i, cps.size())) {
          std::string one;
          AppendUtf8(one, cps[i]);
          return Value::Str(one);
        }
      } else if (key.is_string()) {
        return GetAttr(obj, key.str());
      }
      break;
    default:
      break;
  }
  if (key.is_string()) {
    return Value::Undefined(Quote(ObjectName(obj)) + " has no attribute " + Quote(key.str()));
  }
  return Value::Undefined(Quote(ObjectName(obj)) + " has no element " +
                          EscapeForDisplay(ToPyRepr(key)));
}

Result<Value> Renderer::Slice(const Value& obj, const Value& start, const Value& stop,
                              const Value& step) {
  Status st;
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_list()) {
    auto idx = SliceIndices(obj.items().size(), start, stop, step, &st);
    if (!st.ok()) return st;
    std::vector<Value> items;
    for (size_t i : idx) items.push_back(obj.items()[i]);
    return Value::MakeList(std::move(items), obj.is_tuple());
  }
  if (obj.is_string()) {
    auto cps = DecodeUtf8(obj.str());
    auto idx = SliceIndices(cps.size(), start, stop, step, &st);
    if (!st.ok()) return st;
    std::string out;
    for (size_t i : idx) AppendUtf8(out, cps[i]);
    return Value::Str(std::move(out));
  }
  return Value::Undefined(Quote(ObjectName(obj)) + " is not subscriptable");
}

// ---- validation and entry point ------------------------------------------------------------

namespace {

const std::set<std::string>& KnownFilters() {
  static const std::set<std::string> k = {
      "tojson",   "safe",   "string",     "e",          "escape",     "forceescape", "trim",
      "upper",    "lower",  "capitalize", "title",      "length",     "count",       "wordcount",
      "default",  "d",      "list",       "first",      "last",       "reverse",     "join",
      "replace",  "indent", "int",        "float",      "abs",        "round",       "items",
      "dictsort", "sort",   "unique",     "min",        "max",        "sum",         "attr",
      "map",      "select", "reject",     "selectattr", "rejectattr", "center"};
  return k;
}
const std::set<std::string>& KnownTests() {
  static const std::set<std::string> k = {
      "defined", "undefined",   "none",  "string",  "mapping",     "iterable", "sequence",
      "number",  "integer",     "float", "boolean", "true",        "false",    "callable",
      "lower",   "upper",       "odd",   "even",    "divisibleby", "eq",       "equalto",
      "==",      "ne",          "!=",    "sameas",  "lt",          "lessthan", "le",
      "gt",      "greaterthan", "ge",    "in"};
  return k;
}

Status ValidateExpr(const Expr& e, const std::string& origin) {
  auto where = [&](const std::string& what) {
    return Unsupported("template " + origin + " line " + std::to_string(e.line) +
                       ": unsupported construct: " + what);
  };
  if (e.kind == ExprKind::kFilter && !KnownFilters().count(e.name)) {
    return where("filter " + Quote(e.name));
  }
  if (e.kind == ExprKind::kTest && !KnownTests().count(e.name)) {
    return where("test " + Quote(e.name));
  }
  for (const auto& c : e.children) {
    if (c) TRACE_RETURN_IF_ERROR(ValidateExpr(*c, origin));
  }
  for (const auto& c : e.args) TRACE_RETURN_IF_ERROR(ValidateExpr(*c, origin));
  for (const auto& [k, c] : e.kwargs) TRACE_RETURN_IF_ERROR(ValidateExpr(*c, origin));
  return Status::Ok();
}

Status ValidateBody(const Body& body, const std::string& origin) {
  for (const auto& s : body) {
    if (s->expr) TRACE_RETURN_IF_ERROR(ValidateExpr(*s->expr, origin));
    if (s->filter) TRACE_RETURN_IF_ERROR(ValidateExpr(*s->filter, origin));
    for (const auto& d : s->defaults) {
      if (d) TRACE_RETURN_IF_ERROR(ValidateExpr(*d, origin));
    }
    for (const auto& [cond, b] : s->branches) {
      TRACE_RETURN_IF_ERROR(ValidateExpr(*cond, origin));
      TRACE_RETURN_IF_ERROR(ValidateBody(b, origin));
    }
    TRACE_RETURN_IF_ERROR(ValidateBody(s->body, origin));
    TRACE_RETURN_IF_ERROR(ValidateBody(s->else_body, origin));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateProgram(const Program& program) {
  return ValidateBody(program.body, program.origin);
}

Result<std::string> RenderProgram(const Program& program, std::shared_ptr<Dict> globals) {
  Renderer renderer(program, std::move(globals));
  return renderer.Run();
}

}  // namespace trace::engine::tmpl
