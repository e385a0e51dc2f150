// Template evaluator: the Renderer's statements and expressions, following jinja2 3.1
// (runtime.py: loops, macros, the default Undefined), and the entry point RenderProgram.
// The operators are in operators.cc, attribute and item access (sandbox.py) in access.cc,
// the check that a program names only supported filters and tests in validate.cc, the
// filters in filters.cc, the tests and globals in builtins.cc, Python's str/dict/list methods
// in methods.cc (each kind a table of named functions, renderer.h), Python's string
// algorithms in py_string.cc.
#include <algorithm>
#include <climits>
#include <string>

#include "base/escape.h"
#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

// ---- helpers shared by the renderer's files (renderer.h) -------------------------------

Status TypeError(std::string m) {
  return InvalidArgument(std::move(m));
}

// Python has big ints; we have int64 and say so instead of wrapping around.
Status IntTooLarge() {
  return Unsupported("unsupported construct: integer result outside 64 bits (Python big int)");
}
namespace {
thread_local size_t max_built_size = RenderLimits{}.max_size;
}  // namespace

size_t MaxBuiltSize() {
  return max_built_size;
}

Status TooLarge(const std::string& what) {
  return InvalidArgument(what + " would be larger than " + std::to_string(max_built_size) +
                         " bytes");
}

Status WidthTooLarge(const std::string& what) {
  return InvalidArgument(what + " would be wider than " + std::to_string(kMaxIndent) +
                         " characters");
}

Result<Value> StrResult(Result<std::string> built) {
  if (!built.ok()) return built.status();
  return Value::Str(std::move(built).value());
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

// Accessing or operating on an undefined value: its hint, or jinja2's generic message.
Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.str();
  return InvalidArgument(hint.empty() ? "value is undefined" : hint);
}

namespace {

// Nesting limits standing in for Python's recursion limit.
constexpr int kMaxCallDepth = 256;

}  // namespace

// ---- the renderer ----------------------------------------------------------------------

Renderer::SizeBoundScope::SizeBoundScope(size_t bound) : saved_(max_built_size) {
  max_built_size = bound;
}

Renderer::SizeBoundScope::~SizeBoundScope() {
  max_built_size = saved_;
}

Renderer::Renderer(const Program& program, std::shared_ptr<Dict> globals,
                   const RenderLimits& limits)
    : size_bound_(limits.max_size), limits_(limits), program_(program) {
  frame_ = std::make_shared<Frame>();
  globals_ = std::move(globals);
}

// A macro holds its defining frame (its closure), and that frame holds the macro: a
// reference cycle that would keep the frame, and every value in it (the messages of the
// conversation among them), alive after the render. Nothing calls a macro after its
// render, so dropping each macro's function here breaks every such cycle.
// A namespace can hold itself, directly (`{% set ns.self = ns %}`) or through a list or
// another namespace: a cycle of shared_ptrs, leaked unless broken. Emptying every namespace
// of the render breaks them all; nothing reads a namespace after its render.
Renderer::~Renderer() {
  for (const auto& made : macros_) {
    if (auto fn = made.lock()) fn->fn = nullptr;
  }
  std::vector<std::pair<std::string, Value>> attributes;  // freed after the loop
  for (const auto& made : namespaces_) {
    if (auto ns = made.lock()) {
      for (auto& entry : ns->entries) attributes.push_back(std::move(entry));
      ns->entries.clear();
    }
  }
}

void Renderer::TrackNamespace(const std::shared_ptr<Dict>& ns) {
  // Forgets the namespaces already freed once the list has doubled since it last did: a
  // loop making a namespace per iteration keeps the list as long as the live ones, not as
  // the steps.
  if (namespaces_.size() >= compact_namespaces_at_) {
    std::erase_if(namespaces_, [](const std::weak_ptr<Dict>& w) { return w.expired(); });
    compact_namespaces_at_ = std::max<size_t>(64, 2 * namespaces_.size());
  }
  namespaces_.push_back(ns);
}

Status Renderer::DepthExceeded(int line) const {
  return Err(line, "value nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
}

Status Renderer::NestingExceeded(int line) const {
  return Err(line, "render nested more than " + std::to_string(kMaxNesting) +
                       " levels deep (expressions, statements and macro calls together)");
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

Status Renderer::StepsExceeded(int line) const {
  return Err(line, "render would take more than " + std::to_string(limits_.max_steps) +
                       " steps (loop iterations and macro calls)");
}

// Checked where the output grows rather than per built value: each piece is within
// max_size, but a loop can append any number of them.
Status Renderer::Append(std::string& out, std::string_view piece, int line) const {
  if (out.size() > limits_.max_size || piece.size() > limits_.max_size - out.size()) {
    return Err(line, "rendered output would be larger than " + std::to_string(limits_.max_size) +
                         " bytes");
  }
  out.append(piece);
  return Status::Ok();
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
  NestingScope level(*this);
  if (level.Exceeded()) return NestingExceeded(s.line);
  switch (s.kind) {
    case StmtKind::kText:
      return Append(out, s.text, s.line);
    case StmtKind::kOutput: {
      TRACE_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      return Append(out, ToPyStr(v), s.line);
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
    case StmtKind::kCallBlock:
      return ExecCallBlock(s, out);
    case StmtKind::kFilterBlock:
      return ExecFilterBlock(s, out);
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

// Out of Exec, which recurses once per level (see Eval): {% call %} and {% filter %}.
Status Renderer::ExecCallBlock(const Stmt& s, std::string& out) {
  Value caller = MakeMacro(s, "caller");
  const Expr& call = *s.expr;
  TRACE_ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0]));
  TRACE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call));
  args.keyword.emplace_back("caller", caller);
  TRACE_ASSIGN_OR_RETURN(Value result, CallValue(callee, args, call.line));
  return Append(out, ToPyStr(result), s.line);
}

Status Renderer::ExecFilterBlock(const Stmt& s, std::string& out) {
  std::string inner;
  TRACE_RETURN_IF_ERROR(ExecBody(s.body, inner));
  TRACE_ASSIGN_OR_RETURN(Value v, EvalWithBlock(*s.expr, std::move(inner)));
  return Append(out, ToPyStr(v), s.line);
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

// ExecFor is on the render's recursion for every loop a macro's body holds (see Eval): what
// needs many locals, the items and the `loop` variable, is made out of line.
Result<std::vector<Value>> Renderer::LoopItems(const Stmt& s) {
  TRACE_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr));
  auto iterated = ToList(seq);
  if (!iterated.ok()) return Locate(iterated.status(), s.line);
  std::vector<Value> items = std::move(iterated).value();
  if (!s.filter) return items;
  auto outer = frame_;
  std::vector<Value> kept;
  for (const auto& item : items) {
    TRACE_RETURN_IF_ERROR(Step(s.line));
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
  return kept;
}

Value Renderer::LoopInfo(const std::vector<Value>& items, size_t i) {
  const size_t n = items.size();
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
  // Its entries are numbers, the callable and the items either side (or undefined).
  const int depth =
      1 + std::max({1, i > 0 ? items[i - 1].depth() : 0, i + 1 < n ? items[i + 1].depth() : 0});
  return Value::MakeDict(loop, depth);
}

Status Renderer::ExecFor(const Stmt& s, std::string& out) {
  TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, LoopItems(s));
  if (items.empty()) return ExecBody(s.else_body, out);
  auto outer = frame_;
  ++loop_depth_;
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    if (Status st = Step(s.line); !st.ok()) {
      --loop_depth_;
      return st;
    }
    frame_ = std::make_shared<Frame>();
    frame_->parent = outer;
    frame_->vars.Set("loop", LoopInfo(items, i));
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
    // The depth limit alone lets a macro that calls itself twice make 2^256 calls.
    TRACE_RETURN_IF_ERROR(r.Step(stmt->line));
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

// Eval is the recursion of every expression: its frame is on the stack once per level of
// the render's nesting (kMaxNesting), so it only dispatches, and each kind that needs
// locals has a function of its own, kept out of line. One frame holding the locals of every
// kind cost about 8 KB a level under ASan at -O0 (and about 6 at -O2), which put a render
// at the nesting bound within 2 MB of an 8 MB stack.
Result<Value> Renderer::Eval(const Expr& e) {
  NestingScope level(*this);
  if (level.Exceeded()) return NestingExceeded(e.line);
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.value;
    case ExprKind::kName:
      return Lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple:
      return EvalSequence(e);
    case ExprKind::kDict:
      return EvalDict(e);
    case ExprKind::kGetAttr:
      return EvalGetAttr(e);
    case ExprKind::kGetItem:
      return EvalGetItem(e);
    case ExprKind::kSlice:
      return EvalSlice(e);
    case ExprKind::kCall:
      return EvalCall(e);
    case ExprKind::kFilter:
    case ExprKind::kTest:
      return EvalFilterOrTest(e);
    case ExprKind::kUnary:
      return EvalUnary(e);
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kCondExpr:
      return EvalBranch(e);
    case ExprKind::kBinary:
      return EvalBinary(e);
  }
  return Err(e.line, "unknown expression");
}

Result<Value> Renderer::EvalSequence(const Expr& e) {
  std::vector<Value> items;
  for (const auto& c : e.children) {
    TRACE_ASSIGN_OR_RETURN(Value v, Eval(*c));
    items.push_back(std::move(v));
  }
  Result<Value> list = Value::MakeList(std::move(items), e.kind == ExprKind::kTuple);
  if (TooDeep(list)) return DepthExceeded(e.line);
  return list;
}

Result<Value> Renderer::EvalDict(const Expr& e) {
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
  Result<Value> dict = Value::MakeDict(std::move(d));
  if (TooDeep(dict)) return DepthExceeded(e.line);
  return dict;
}

Result<Value> Renderer::EvalGetAttr(const Expr& e) {
  TRACE_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
  auto r = GetAttr(obj, e.name);
  if (!r.ok()) return Locate(r.status(), e.line);
  return r;
}

Result<Value> Renderer::EvalGetItem(const Expr& e) {
  TRACE_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
  TRACE_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
  auto r = GetItem(obj, key);
  if (!r.ok()) return Locate(r.status(), e.line);
  return r;
}

Result<Value> Renderer::EvalSlice(const Expr& e) {
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

Result<Value> Renderer::EvalCall(const Expr& e) {
  TRACE_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0]));
  TRACE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
  auto r = CallValue(callee, args, e.line);
  if (TooDeep(r)) return DepthExceeded(e.line);
  return r;
}

Result<Value> Renderer::EvalFilterOrTest(const Expr& e) {
  TRACE_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
  TRACE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
  if (e.kind == ExprKind::kTest) {
    auto r = ApplyTest(e.name, v, args);
    if (!r.ok()) return Locate(r.status(), e.line);
    return Value::Bool(*r != e.negated);
  }
  auto r = ApplyFilter(e.name, v, args);
  if (!r.ok()) return Locate(r.status(), e.line);
  if (TooDeep(r)) return DepthExceeded(e.line);
  return r;
}

Result<Value> Renderer::EvalUnary(const Expr& e) {
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

// and, or, and the inline if: the first operand decides which other one is evaluated.
Result<Value> Renderer::EvalBranch(const Expr& e) {
  TRACE_ASSIGN_OR_RETURN(Value first, Eval(*e.children[0]));
  switch (e.kind) {
    case ExprKind::kAnd:
      if (!first.Truthy()) return first;
      return Eval(*e.children[1]);
    case ExprKind::kOr:
      if (first.Truthy()) return first;
      return Eval(*e.children[1]);
    default:  // kCondExpr: `children[1] if children[0] else children[2]`
      if (first.Truthy()) return Eval(*e.children[1]);
      if (e.children[2]) return Eval(*e.children[2]);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
}

Result<Value> Renderer::EvalBinary(const Expr& e) {
  TRACE_ASSIGN_OR_RETURN(Value l, Eval(*e.children[0]));
  TRACE_ASSIGN_OR_RETURN(Value r, Eval(*e.children[1]));
  auto res = Binary(e.name, l, r);
  if (!res.ok()) return Locate(res.status(), e.line);
  if (TooDeep(res)) return DepthExceeded(e.line);
  return res;
}

// ---- entry point ----

Result<std::string> RenderProgram(const Program& program, std::shared_ptr<Dict> globals,
                                  const RenderLimits& limits) {
  Renderer renderer(program, std::move(globals), limits);
  return renderer.Run();
}

}  // namespace trace::engine::tmpl
