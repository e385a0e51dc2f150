// Template evaluator: statements, expressions, jinja2's default Undefined, the filters,
// tests, globals and Python str/dict/list methods chat templates use, following jinja2
// 3.1 (filters.py, tests.py, runtime.py, sandbox.py) and transformers' globals.
#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <string>

#include "base/escape.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

// ---- small helpers -------------------------------------------------------------------

namespace {

Status TypeError(std::string m) {
  return InvalidArgument(std::move(m));
}

// Python has big ints; we have int64 and say so instead of wrapping around.
Status IntTooLarge() {
  return Unsupported("unsupported construct: integer result outside 64 bits (Python big int)");
}
// Guards against templates that would build gigabytes (jinja2 would try and run out of
// memory); no chat template comes near these.
constexpr int64_t kMaxIndent = 1 << 16;
constexpr size_t kMaxBuiltSize = size_t{256} << 20;
Status TooLarge(const std::string& what) {
  return InvalidArgument(what + " would be larger than " + std::to_string(kMaxBuiltSize) +
                         " bytes");
}
// Nesting limits standing in for Python's recursion limit.
constexpr int kMaxCallDepth = 256;

// A value in a message: quoted, escaped and clipped (base/escape.h).
std::string Quote(const std::string& s) {
  return "'" + EscapeForDisplay(s) + "'";
}

// jinja2's object description in "has no attribute" messages: 'dict object'.
std::string ObjectName(const Value& v) {
  return std::string(KindName(v)) + " object";
}

Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.str();
  return InvalidArgument(hint.empty() ? "value is undefined" : hint);
}

char32_t ToUpper(char32_t c) {
  return static_cast<char32_t>(utf8proc_toupper(c));
}
char32_t ToLower(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(c));
}
char32_t ToTitle(char32_t c) {
  return static_cast<char32_t>(utf8proc_totitle(c));
}
bool IsCased(char32_t c) {
  return ToUpper(c) != c || ToLower(c) != c || ToTitle(c) != c;
}
bool IsAlnumCp(char32_t c) {
  auto cat = utf8proc_category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}
bool IsAlphaCp(char32_t c) {
  auto cat = utf8proc_category(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}

std::string MapChars(const std::string& s, char32_t (*f)(char32_t)) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : DecodeUtf8(s)) AppendUtf8(out, f(c));
  return out;
}

std::string PyUpper(const std::string& s) {
  return MapChars(s, ToUpper);
}
std::string PyLower(const std::string& s) {
  return MapChars(s, ToLower);
}

std::string PyCapitalize(const std::string& s) {
  auto cps = DecodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i)
    AppendUtf8(out, i == 0 ? ToTitle(cps[i]) : ToLower(cps[i]));
  return out;
}

// str.title(): a cased character after an uncased one is titlecased, others lowercased.
std::string PyTitle(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    AppendUtf8(out, prev_cased ? ToLower(c) : ToTitle(c));
    prev_cased = IsCased(c);
  }
  return out;
}

size_t CodePointLength(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Python str.split(sep=None, maxsplit=-1).
std::vector<std::string> PySplit(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit != 0) {
      size_t p = s.find(*sep, start);
      if (p == std::string::npos) break;
      out.push_back(s.substr(start, p - start));
      start = p + sep->size();
      if (maxsplit > 0) --maxsplit;
    }
    out.push_back(s.substr(start));
    return out;
  }
  auto cps = DecodeUtf8(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && IsPyWhitespace(cps[i])) ++i;
    if (i >= cps.size()) break;
    if (maxsplit == 0) {
      // The rest, with trailing whitespace stripped.
      size_t e = cps.size();
      while (e > i && IsPyWhitespace(cps[e - 1])) --e;
      out.push_back(EncodeUtf8(std::u32string_view(cps.data() + i, e - i)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsPyWhitespace(cps[j])) ++j;
    out.push_back(EncodeUtf8(std::u32string_view(cps.data() + i, j - i)));
    if (maxsplit > 0) --maxsplit;
    i = j;
  }
  return out;
}

std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    auto cps = DecodeUtf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cps.size()) AppendUtf8(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += repl;
    start = p + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::vector<std::string> PySplitLines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  auto cps = DecodeUtf8(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
               c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    out.push_back(
        EncodeUtf8(std::u32string_view(cps.data() + start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size())
    out.push_back(EncodeUtf8(std::u32string_view(cps.data() + start, cps.size() - start)));
  return out;
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

struct Frame {
  std::shared_ptr<Frame> parent;
  Dict vars;
};

class Renderer {
 public:
  Renderer(const Program& program, std::shared_ptr<Dict> globals) : program_(program) {
    frame_ = std::make_shared<Frame>();
    globals_ = std::move(globals);
  }
  // A macro holds its defining frame (its closure), and that frame holds the macro: a
  // reference cycle that would keep the frame, and every value in it (the messages of the
  // conversation among them), alive after the render. Nothing calls a macro after its
  // render, so dropping each macro's function here breaks every such cycle.
  ~Renderer() {
    for (const auto& made : macros_) {
      if (auto fn = made.lock()) fn->fn = nullptr;
    }
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  Result<std::string> Run() {
    std::string out;
    TRACE_RETURN_IF_ERROR(ExecBody(program_.body, out));
    return out;
  }

  Status Err(int line, const std::string& what) const {
    return InvalidArgument("template " + program_.origin + " line " + std::to_string(line) + ": " +
                           what);
  }
  // Adds the template location to an error from a filter, test, method or callee.
  Status Locate(const Status& st, int line) const {
    if (st.message().rfind("template ", 0) == 0) return st;
    return Status(st.code(), "template " + program_.origin + " line " + std::to_string(line) +
                                 ": " + st.message());
  }

  // ---- statements ----

  enum class Flow { kNormal, kBreak, kContinue };

  Status ExecBody(const Body& body, std::string& out) {
    for (const auto& stmt : body) {
      TRACE_RETURN_IF_ERROR(Exec(*stmt, out));
      if (flow_ != Flow::kNormal) return Status::Ok();
    }
    return Status::Ok();
  }

  Status Exec(const Stmt& s, std::string& out) {
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

  Result<Value> EvalWithBlock(const Expr& filter_chain, std::string text) {
    auto saved = frame_;
    frame_ = std::make_shared<Frame>();
    frame_->parent = saved;
    frame_->vars.Set(" block ", Value::Str(std::move(text)));
    auto r = Eval(filter_chain);
    frame_ = saved;
    return r;
  }

  Status Assign(const std::vector<std::string>& targets, const Value& v, Dict& vars, int line) {
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

  Status ExecSet(const Stmt& s) {
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
        return Err(s.line,
                   "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
      }
      ns.dict()->Set(s.targets[1], v);
      return Status::Ok();
    }
    return Assign(s.targets, v, frame_->vars, s.line);
  }

  static bool HasBlockName(const Expr& e) {
    if (e.kind == ExprKind::kName) return e.name == " block ";
    return !e.children.empty() && e.children[0] && HasBlockName(*e.children[0]);
  }

  Result<std::vector<Value>> Iterate(const Value& v, int line) {
    switch (v.kind()) {
      case Kind::kUndefined:
        return std::vector<Value>{};
      case Kind::kList:
        return v.items();
      case Kind::kDict: {
        std::vector<Value> keys;
        for (const auto& [k, val] : v.dict()->entries) keys.push_back(Value::Str(k));
        return keys;
      }
      case Kind::kString: {
        std::vector<Value> chars;
        for (char32_t c : DecodeUtf8(v.str())) {
          std::string one;
          AppendUtf8(one, c);
          chars.push_back(Value::Str(one));
        }
        return chars;
      }
      default:
        return Err(line, Quote(std::string(KindName(v))) + " object is not iterable");
    }
  }

  Status ExecFor(const Stmt& s, std::string& out) {
    TRACE_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr));
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(seq, s.line));
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

  Value MakeMacro(const Stmt& s, std::string name = "") {
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
        return InvalidArgument("maximum recursion depth exceeded calling macro '" + macro_name +
                               "'");
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

  Value Lookup(const std::string& name) const {
    for (const Frame* f = frame_.get(); f; f = f->parent.get()) {
      if (const Value* v = f->vars.Find(name)) return *v;
    }
    if (const Value* v = globals_->Find(name)) return *v;
    if (Value b = Builtin(name); !b.is_undefined()) return b;
    return Value::Undefined(Quote(name) + " is undefined");
  }

  Value Builtin(const std::string& name) const;

  Result<CallArgs> EvalArgs(const Expr& e) {
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

  Result<Value> CallValue(const Value& callee, CallArgs& args, int line) {
    if (callee.is_undefined()) return Locate(UndefinedError(callee), line);
    if (callee.kind() != Kind::kCallable) {
      return Err(line, Quote(KindName(callee)) + " object is not callable");
    }
    auto r = callee.callable()->fn(*this, args);
    if (!r.ok()) return Locate(r.status(), line);
    return r;
  }

  Result<Value> Eval(const Expr& e) {
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
            return Err(e.line, std::string("unsupported construct: dict key of type ") +
                                   KindName(k) + " (only string keys are supported)");
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

  static Result<Value> Binary(const std::string& op, const Value& l, const Value& r) {
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
      return TypeError("unsupported operand type(s) for " + op + ": " + Quote(KindName(l)) +
                       " and " + Quote(KindName(r)));
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
        if (unit > 0 && static_cast<uint64_t>(n) > kMaxBuiltSize / unit) {
          return TooLarge("repetition result");
        }
        if (seq->is_string()) {
          std::string out;
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

  static Result<int> Compare(const Value& l, const Value& r, const std::string& op) {
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

  static Result<bool> Contains(const Value& container, const Value& needle) {
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

  Result<Value> GetAttr(const Value& obj, const std::string& name) {
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

  Result<Value> GetItem(const Value& obj, const Value& key) {
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

  static Result<Value> Slice(const Value& obj, const Value& start, const Value& stop,
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

  Value BoundMethod(const Value& self, const std::string& name);

  Result<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args);
  Result<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args);

  const Program& program_;
  std::shared_ptr<Dict> globals_;
  std::shared_ptr<Frame> frame_;
  std::vector<std::weak_ptr<Callable>> macros_;  // every macro made: ~Renderer breaks cycles
  Flow flow_ = Flow::kNormal;
  int loop_depth_ = 0;
  int call_depth_ = 0;
};

// ---- argument helpers ----------------------------------------------------------------

namespace {

// Positional argument `index` or keyword `name`, else nullptr.
const Value* Arg(const CallArgs& args, size_t index, std::string_view name) {
  if (index < args.positional.size()) return &args.positional[index];
  return args.Keyword(name);
}

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

bool IsNoneOrMissing(const Value* v) {
  return !v || v->is_none();
}

Value StrList(const std::vector<std::string>& parts) {
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
    out += ToPyStr(*v);
    i = close;
  }
  return out;
}

}  // namespace

// ---- methods ---------------------------------------------------------------------------

namespace {

Result<Value> CallStrMethod(const std::string& s, const std::string& name, CallArgs& args) {
  const std::string fn = "str." + name;
  if (name == "upper") return Value::Str(PyUpper(s));
  if (name == "lower" || name == "casefold") return Value::Str(PyLower(s));
  if (name == "title") return Value::Str(PyTitle(s));
  if (name == "capitalize") return Value::Str(PyCapitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (char32_t c : DecodeUtf8(s)) AppendUtf8(out, ToUpper(c) != c ? ToUpper(c) : ToLower(c));
    return Value::Str(out);
  }
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
    return Value::Str(
        PyReplace(s, old, repl, count && count->is_integral() ? count->as_int() : -1));
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
      for (char32_t c : DecodeUtf8(it->str())) {
        std::string one;
        AppendUtf8(one, c);
        items.push_back(Value::Str(one));
      }
    } else {
      return TypeError("can only join an iterable");
    }
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return TypeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                         KindName(items[i]) + " found");
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
    if (w->as_int() > kMaxIndent) return TooLarge("zfill width");
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
    if (w->as_int() > kMaxIndent) return TooLarge(fn + " width");
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

}  // namespace

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
       [](Renderer&, CallArgs& a) -> Result<Value> {
         auto d = std::make_shared<Dict>();
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

// jinja2's make_attrgetter: "a.b.0" walks items with getitem semantics.
Result<Value> GetPath(Renderer& r, const Value& item, const std::string& path);

Result<int> SortCompare(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) {
    std::string x = PyLower(a.str()), y = PyLower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
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

std::string HtmlEscape(const std::string& s) {
  std::string out;
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
        if (indent->as_int() > kMaxIndent) return TooLarge("tojson indent");
        ind = std::string(static_cast<size_t>(std::max<int64_t>(0, indent->as_int())), ' ');
      } else if (indent->is_string()) {
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
  if (name == "string") return Value::Str(need_str(v));
  if (name == "e" || name == "escape" || name == "forceescape")
    return Value::Str(HtmlEscape(need_str(v)));
  if (name == "trim") {
    const Value* chars = Arg(args, 0, "chars");
    const std::string* set = (chars && chars->is_string()) ? &chars->str() : nullptr;
    return Value::Str(PyStrip(need_str(v), set, true, true));
  }
  if (name == "upper") return Value::Str(PyUpper(need_str(v)));
  if (name == "lower") return Value::Str(PyLower(need_str(v)));
  if (name == "capitalize") return Value::Str(PyCapitalize(need_str(v)));
  if (name == "title") {
    // jinja2: split on runs of [-\s({[<], uppercase the first char of each chunk.
    std::string s = need_str(v), out;
    auto cps = DecodeUtf8(s);
    bool at_start = true;
    for (char32_t c : cps) {
      bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPyWhitespace(c);
      if (sep) {
        AppendUtf8(out, c);
        at_start = true;
        continue;
      }
      AppendUtf8(out, at_start ? ToUpper(c) : ToLower(c));
      at_start = false;
    }
    return Value::Str(out);
  }
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
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += d;
      if (!IsNoneOrMissing(attribute)) {
        TRACE_ASSIGN_OR_RETURN(Value x, GetPath(*this, items[i], need_str(*attribute)));
        out += need_str(x);
      } else {
        out += need_str(items[i]);
      }
    }
    return Value::Str(out);
  }
  if (name == "replace") {
    const Value* old = Arg(args, 0, "old");
    const Value* repl = Arg(args, 1, "new");
    const Value* count = Arg(args, 2, "count");
    if (!old || !repl) return TypeError("replace filter needs old and new");
    return Value::Str(PyReplace(need_str(v), need_str(*old), need_str(*repl),
                                IsNoneOrMissing(count) ? -1 : count->as_int()));
  }
  if (name == "indent") {
    const Value* width = Arg(args, 0, "width");
    const Value* first = Arg(args, 1, "first");
    const Value* blank = Arg(args, 2, "blank");
    std::string indention =
        width && width->is_string()
            ? width->str()
            : std::string(width && width->is_integral()
                              ? static_cast<size_t>(std::max<int64_t>(0, width->as_int()))
                              : 4,
                          ' ');
    if (indention.size() > static_cast<size_t>(kMaxIndent)) return TooLarge("indent width");
    std::string s = need_str(v) + "\n";
    auto lines = PySplitLines(s, false);
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
      std::vector<Value> out, seen;
      for (size_t i = 0; i < items.size(); ++i) {
        Value k =
            (!case_sensitive && keys[i].is_string()) ? Value::Str(PyLower(keys[i].str())) : keys[i];
        bool dup = false;
        for (const auto& s : seen) dup = dup || PyEquals(s, k);
        if (dup) continue;
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
    Value total = start ? *start : Value::Int(0);
    TRACE_ASSIGN_OR_RETURN(std::vector<Value> items, ToList(v));
    for (const auto& item : items) {
      Value x = item;
      if (!IsNoneOrMissing(attribute)) {
        TRACE_ASSIGN_OR_RETURN(x, GetPath(*this, item, need_str(*attribute)));
      }
      TRACE_ASSIGN_OR_RETURN(total, Binary("+", total, x));
    }
    return total;
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
