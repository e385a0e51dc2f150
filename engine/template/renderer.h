// The Renderer: one render of a parsed Program (statements, expressions, filters, tests,
// globals, methods), and the helpers its files share. Private to engine/template/; the
// rest of the module reaches it through RenderProgram (template_internal.h).
//
// Its bodies are split by idea: interpreter.cc (statements, expressions, RenderProgram),
// operators.cc (Binary, Compare, Contains), access.cc (GetAttr, GetItem, Slice),
// filters.cc (ApplyFilter and the filter table), builtins.cc (ApplyTest and the test table,
// Builtin), methods.cc (BoundMethod, CallStrMethod and the method tables). validate.cc holds
// ValidateProgram, which runs at parse time, before any Renderer.
//
// Ownership: a Renderer borrows its Program (which must outlive it) and shares the
// globals dict with its caller; it owns the frames it makes. A macro's Callable holds its
// defining frame, which holds the macro: ~Renderer drops every macro's function so that
// no value of the render outlives it, and empties every namespace the render made, for the
// same reason (a namespace may hold itself). Thread safety: one Renderer serves one render on
// one thread; several Renderers may render the same Program at once. Errors: every
// fallible step returns a Status; Err and Locate prefix "template ORIGIN line N: ",
// constructs outside the subset are Unsupported, limits (kMaxIndent, RenderLimits,
// kMaxValueDepth, kMaxNesting, the macro call depth) and Python's own errors are
// InvalidArgument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

// ---- helpers shared by the renderer's files (defined in interpreter.cc) -----------------

// Python's TypeError (an InvalidArgument).
Status TypeError(std::string m);
// Using an undefined value (an attribute of it, an operator on it): its hint ("'x' is
// undefined"), else jinja2's generic message.
Status UndefinedError(const Value& undefined);
// Python has big ints; we have int64 and say so instead of wrapping around.
Status IntTooLarge();
// Guards against templates that would build gigabytes (jinja2 would try and run out of
// memory); no chat template comes near these.
inline constexpr int64_t kMaxIndent = 1 << 16;
// The render's recursion, counted as one budget: every expression being evaluated, every
// statement being executed and so every macro call adds a level. The parser bounds one
// expression's depth and one body's nesting (200 each), but a macro calling itself stacks
// them: 256 calls of a body 200 deep would need 51,200 native frames, which overflow the
// stack (under ASan a level costs kilobytes). Python's recursion limit plays this part in
// jinja2 (3.1 stops `{% macro f(n) %}{% if n < N %}{{ f(n + 1) }}{% endif %}` after 247
// calls); this bound stops that macro, 3 levels per call, after 170, and lets every
// template the parser accepts render without macros (200 + 200 levels at most). A count, not a
// measure of the stack: whether a template renders is the same in every build.
inline constexpr int kMaxNesting = 512;
// The bound on built values (RenderLimits::max_size) of the render in progress on this
// thread; RenderLimits{}.max_size outside a render. Thread-local rather than a Renderer
// member: the size checks sit in free functions that a render reaches by many paths (str
// and tojson in value.cc, the operators, Python's str methods), and a render runs on one
// thread from start to end. The Renderer sets it for its lifetime (SizeBoundScope).
size_t MaxBuiltSize();
// "`what` would be larger than MaxBuiltSize() bytes".
Status TooLarge(const std::string& what);
// "`what` would be wider than kMaxIndent characters": a width or indent over its own bound.
Status WidthTooLarge(const std::string& what);
// A string built by a fallible function as a Value, or its error.
Result<Value> StrResult(Result<std::string> built);
// What a render may do: RenderLimits (chat_template.h). A step takes 1 to 2 µs (Release,
// loaded 2-core machine), so a render that hits the default step bound fails within seconds
// (template_fuzz holds its renders to smaller bounds: tests/fuzz/template_fuzz.cc).
// A value in a message: quoted, escaped and clipped (base/escape.h).
std::string Quote(const std::string& s);
// Positional argument `index` or keyword `name`, else nullptr.
const Value* Arg(const CallArgs& args, size_t index, std::string_view name);
// What iterating `v` yields, as Python and Jinja do (builtins.cc): a list's items, a dict's
// keys, a string's characters, nothing for undefined; a TypeError for anything else. The
// sequence filters and {% for %} share it.
Result<std::vector<Value>> ToList(const Value& v);
// Python's str.`name`(args) on `s` (methods.cc); filters and tests reuse it.
Result<Value> CallStrMethod(const std::string& s, const std::string& name, CallArgs& args);

// ---- the builtin tables: one per kind, the one list of its names ---------------------------
//
// Filters (filters.cc), tests (builtins.cc) and Python's str, dict and list methods
// (methods.cc) are each a table {name -> function}, built once on first use. A call looks its
// name up once; the parse-time check (validate.cc) and the sandbox's attribute access
// (access.cc) ask the same tables which names exist, so a name is written in one place. An
// alias is a second name for the same function. Every function is passed the name it was
// called by, for its messages (`test 'equalto' needs an argument`), never to choose what to do.

// {name -> function}, built once: open addressing in a power-of-two array at most a quarter
// full, hashed on the length and three bytes of the name, so that a lookup is a few
// instructions and one compare of a short string, about what the first test of the `name ==`
// chains these tables replaced cost (a std::unordered_map takes twice as long). Every
// function is non-null; the first of two entries with one name wins.
template <typename Fn>
class NameTable {
 public:
  NameTable(std::initializer_list<std::pair<std::string_view, Fn>> entries) {
    size_t size = 8;
    while (size < 4 * entries.size()) size *= 2;
    slots_.resize(size);
    while ((size_t{1} << (64 - shift_)) < size) --shift_;
    for (const auto& entry : entries) {
      size_t i = Slot(entry.first);
      while (slots_[i].second && slots_[i].first != entry.first) i = (i + 1) & (size - 1);
      if (!slots_[i].second) slots_[i] = entry;
    }
  }
  // The function of `name`, or nullptr.
  Fn Find(std::string_view name) const {
    for (size_t i = Slot(name);; i = (i + 1) & (slots_.size() - 1)) {
      if (!slots_[i].second || slots_[i].first == name) return slots_[i].second;
    }
  }
  bool Has(std::string_view name) const { return Find(name) != nullptr; }

 private:
  size_t Slot(std::string_view s) const {
    auto byte = [s](size_t i) -> uint64_t { return static_cast<unsigned char>(s[i]); };
    uint64_t h = s.size();
    if (!s.empty()) h ^= byte(0) << 8 ^ byte(s.size() / 2) << 16 ^ byte(s.size() - 1) << 24;
    return static_cast<size_t>((h * 0x9E3779B97F4A7C15ull) >> shift_);  // the top bits
  }

  std::vector<std::pair<std::string_view, Fn>> slots_;
  int shift_ = 64;
};

using FilterFn = Result<Value> (*)(Renderer& r, const std::string& name, const Value& v,
                                   CallArgs& args);
using TestFn = Result<bool> (*)(const std::string& name, const Value& v, CallArgs& args);
// The filter or test `name`, or nullptr when there is none of that name.
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);
// "unsupported construct: filter 'name'" (or test): a name no table holds, met at render time
// (validate.cc refuses the names a template writes; map and select take theirs as values).
Status UnknownFilter(const std::string& name);
Status UnknownTest(const std::string& name);
// Whether a value of `kind` has the Python method `name` (a str, dict or list one): the
// sandbox exposes it as an attribute, which calling either runs, or refuses as Python's
// immutable sandbox does, or reports as unsupported here.
bool HasMethod(Kind kind, std::string_view name);

// ---- the renderer ------------------------------------------------------------------------

// A scope: a macro's or loop iteration's variables, then its parent's.
struct Frame {
  std::shared_ptr<Frame> parent;
  Dict vars;
};

class Renderer {
 public:
  Renderer(const Program& program, std::shared_ptr<Dict> globals, const RenderLimits& limits);
  // Breaks the macro / closure-frame cycles (see Ownership above).
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Renders the whole program.
  Result<std::string> Run();

  // An error at template line `line`.
  Status Err(int line, const std::string& what) const;
  // Counts one step (a loop iteration or a macro call) against RenderLimits::max_steps; the
  // error names `line`. Inline: it runs once per iteration, an increment and a compare.
  Status Step(int line) {
    if (++steps_ <= limits_.max_steps) return Status::Ok();
    return StepsExceeded(line);
  }
  // True when `r` is a value nesting deeper than kMaxValueDepth. Every expression that can
  // build a list or dict deeper than its parts (a literal, a filter, a call, an operator)
  // checks its result, and fails with DepthExceeded, so no value the template can reach is
  // deeper and the walkers (str, tojson, ==, <, in) recurse at most that far. Inline, on
  // the result in place (no copy or move): it runs on most expressions.
  static bool TooDeep(const Result<Value>& r) { return r.ok() && r->depth() > kMaxValueDepth; }
  // "value nested more than kMaxValueDepth levels deep" at `line`.
  Status DepthExceeded(int line) const;
  // Registers a namespace made by namespace(): ~Renderer empties it (see there).
  void TrackNamespace(const std::shared_ptr<Dict>& ns);
  // Adds the template location to an error from a filter, test, method or callee.
  Status Locate(const Status& st, int line) const;

  // ---- expressions (interpreter.cc) ----

  Result<Value> Eval(const Expr& e);
  // One level of the render's recursion (kMaxNesting) while it lives; Exceeded() says
  // whether this one is past the bound.
  class NestingScope {
   public:
    explicit NestingScope(Renderer& r) : nesting_(++r.nesting_), r_(r) {}
    ~NestingScope() { --r_.nesting_; }
    NestingScope(const NestingScope&) = delete;
    NestingScope& operator=(const NestingScope&) = delete;
    bool Exceeded() const { return nesting_ > kMaxNesting; }

   private:
    int nesting_;
    Renderer& r_;
  };
  // "render nested more than kMaxNesting levels deep" at `line`.
  Status NestingExceeded(int line) const;
  // Eval's kinds, out of line so that Eval's own frame stays small (interpreter.cc).
  [[gnu::noinline]] Result<Value> EvalSequence(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalDict(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalGetAttr(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalGetItem(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalSlice(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalCall(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalFilterOrTest(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalUnary(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalBranch(const Expr& e);
  [[gnu::noinline]] Result<Value> EvalBinary(const Expr& e);
  // A name: the frames innermost first, then the globals, then Builtin.
  Value Lookup(const std::string& name) const;
  Result<CallArgs> EvalArgs(const Expr& e);
  Result<Value> CallValue(const Value& callee, CallArgs& args, int line);

  // ---- operators (operators.cc) ----

  static Result<Value> Binary(const std::string& op, const Value& l, const Value& r);
  // first + terms[0] + terms[1] + ... as Binary adds them (the `sum` filter), in time linear
  // in the result: strings and lists are appended to one buffer, not copied at each step.
  static Result<Value> AddAll(const Value& first, const std::vector<Value>& terms);
  static Result<int> Compare(const Value& l, const Value& r, const std::string& op);
  static Result<bool> Contains(const Value& container, const Value& needle);

  // ---- attribute / item access, jinja2's sandbox getattr / getitem (access.cc) ----

  Result<Value> GetAttr(const Value& obj, const std::string& name);
  Result<Value> GetItem(const Value& obj, const Value& key);
  static Result<Value> Slice(const Value& obj, const Value& start, const Value& stop,
                             const Value& step);

  // ---- filters.cc, builtins.cc and methods.cc ----

  // A global function (range, namespace, ...), or undefined if `name` is none.
  Value Builtin(const std::string& name) const;
  // `self`.`name` as a callable Python method (methods.cc).
  Value BoundMethod(const Value& self, const std::string& name);
  // The filter or test `name` (FindFilter, FindTest) on `v`; Unsupported when there is none.
  Result<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args);
  static Result<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args);

 private:
  // ---- statements (interpreter.cc) ----

  enum class Flow { kNormal, kBreak, kContinue };

  Status ExecBody(const Body& body, std::string& out);
  Status Exec(const Stmt& s, std::string& out);
  [[gnu::noinline]] Status ExecCallBlock(const Stmt& s, std::string& out);
  [[gnu::noinline]] Status ExecFilterBlock(const Stmt& s, std::string& out);
  Result<Value> EvalWithBlock(const Expr& filter_chain, std::string text);
  Status Assign(const std::vector<std::string>& targets, const Value& v, Dict& vars, int line);
  Status ExecSet(const Stmt& s);
  static bool HasBlockName(const Expr& e);
  Status ExecFor(const Stmt& s, std::string& out);
  // The items a loop runs over, its `if` filter applied.
  [[gnu::noinline]] Result<std::vector<Value>> LoopItems(const Stmt& s);
  // The `loop` variable of iteration `i`.
  [[gnu::noinline]] static Value LoopInfo(const std::vector<Value>& items, size_t i);
  Value MakeMacro(const Stmt& s, std::string name = "");
  // Appends `piece` to `out` (the output of the render, of a macro or of a block), unless
  // `out` would grow past RenderLimits::max_size: the error names `line`.
  Status Append(std::string& out, std::string_view piece, int line) const;
  Status StepsExceeded(int line) const;

  // Sets MaxBuiltSize() for this thread while the Renderer lives, restoring the bound it
  // found (a render inside another's would get its own). First member: the last destroyed,
  // after ~Renderer has freed what the render made.
  class SizeBoundScope {
   public:
    explicit SizeBoundScope(size_t bound);
    ~SizeBoundScope();
    SizeBoundScope(const SizeBoundScope&) = delete;
    SizeBoundScope& operator=(const SizeBoundScope&) = delete;

   private:
    size_t saved_;
  };

  SizeBoundScope size_bound_;
  const RenderLimits limits_;
  const Program& program_;
  std::shared_ptr<Dict> globals_;
  std::shared_ptr<Frame> frame_;
  std::vector<std::weak_ptr<Callable>> macros_;  // every macro made: ~Renderer breaks cycles
  std::vector<std::weak_ptr<Dict>> namespaces_;  // namespaces made: ~Renderer empties them
  size_t compact_namespaces_at_ = 64;            // TrackNamespace drops the expired from here
  Flow flow_ = Flow::kNormal;
  int loop_depth_ = 0;
  int call_depth_ = 0;
  int nesting_ = 0;    // NestingScope levels open now
  int64_t steps_ = 0;  // Step() calls so far in this render
};

}  // namespace trace::engine::tmpl
