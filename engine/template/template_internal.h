// Internals of the chat-template interpreter: values, tokens, syntax tree, and the
// lexer / parser / evaluator entry points. Not a public interface; only engine/template/
// and its tests include it.
//
// Ownership: the syntax tree is owned by its Program (unique_ptrs); values share their
// containers through shared_ptr and are immutable except namespaces. A list or dict knows
// its nesting depth (fixed when it is built, as it never changes after), which the renderer
// bounds by kMaxValueDepth; freeing a value recurses a bounded number of levels whatever
// its depth (~List, ~Dict), so a chain of namespaces, which the bound does not cover, is
// freed safely too.
// Thread safety: a
// parsed Program is immutable and can be rendered from several threads; a Value graph
// built during one render belongs to that render. Errors: every fallible step returns a
// Status naming the template origin, the line and the construct or value concerned.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/template/chat_template.h"

namespace trace::engine::tmpl {

// ---- values (Python objects as jinja2 sees them) -----------------------------------

// Most levels a list or dict may nest (a scalar is 0 levels, `[1]` 1, `[[1]]` 2), in place of
// Python's recursion limit: str(), tojson, == and the comparisons walk a value recursively,
// so an unbounded depth (a loop wrapping a list in a list) overflows the stack. Real chat
// templates see a few levels (messages, a message, its tool calls, a call, its function,
// the arguments' own JSON); the deepest input a request can give is a tool call's
// arguments, parsed on their own within the server's kMaxJsonDepth (256,
// recorder/api/json_body.h) below the 5 levels of messages[i].tool_calls[j].function, so
// 261. 512 leaves room for templates that wrap such a value a few times (items(), a
// literal), and costs at most 512 frames of a few hundred bytes in any walk.
inline constexpr int kMaxValueDepth = 512;

enum class Kind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kNamespace,
  kCallable
};

class Value;
struct List;
struct Dict;
struct Callable;
class Renderer;

class Value {
 public:
  Value() = default;  // undefined
  static Value Undefined(std::string hint) {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) {
    Value v(Kind::kBool);
    v.int_ = b;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Kind::kInt);
    v.int_ = i;
    return v;
  }
  static Value Float(double f) {
    Value v(Kind::kFloat);
    v.float_ = f;
    return v;
  }
  static Value Str(std::string s) {
    Value v(Kind::kString);
    v.str_ = std::move(s);
    return v;
  }
  static Value MakeList(std::vector<Value> items, bool tuple = false);
  static Value MakeDict(std::shared_ptr<Dict> dict);
  // A dict whose depth the caller knows (the loop variable, made every iteration), so that
  // its entries need not be scanned; `depth` must be 1 + the deepest entry's depth().
  static Value MakeDict(std::shared_ptr<Dict> dict, int depth);
  static Value MakeNamespace(std::shared_ptr<Dict> dict);
  static Value MakeCallable(std::shared_ptr<Callable> fn);
  // InvalidArgument when `j` nests deeper than kMaxValueDepth.
  static Result<Value> FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  // Python's numbers: bool is an int.
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }
  // Levels of nested lists and dicts: 0 for a scalar, 1 + the deepest item for a list or
  // dict; a namespace or callable counts 1, as the walkers (str, tojson, ==) do not enter it.
  // Inline (after Dict, below): MakeList and MakeDict take it of every item.
  int depth() const;

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return str_; }  // string value, or undefined's hint
  const std::vector<Value>& items() const;         // list items
  bool is_tuple() const;
  const std::shared_ptr<List>& list_ptr() const { return list_; }
  const std::shared_ptr<Dict>& dict() const { return dict_; }  // dict or namespace
  const std::shared_ptr<Callable>& callable() const { return fn_; }

  // Python truthiness (undefined is false).
  bool Truthy() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

// The destructors of List and Dict recurse only a few dozen levels, then free the rest in a
// loop (value.cc): a namespace can hold a chain of namespaces as long as the render's steps
// allow (a loop setting `ns.n = namespace(n=ns.n)`), which the recursive destructors of
// shared_ptr and vector would free one stack frame per level, overflowing the stack.
struct List {
  List() = default;
  List(const List&) = default;
  List& operator=(const List&) = default;
  ~List();
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;  // Value::depth(), set by MakeList
};

// A Python dict with string keys, in insertion order. Also a namespace's attributes and a
// frame's variables, which change after they are made: `depth` holds only for a dict value.
struct Dict {
  Dict() = default;
  Dict(const Dict&) = default;
  Dict& operator=(const Dict&) = default;
  ~Dict();
  std::vector<std::pair<std::string, Value>> entries;
  int depth = 1;  // Value::depth() of a dict value, set by MakeDict
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value value);
};

inline int Value::depth() const {
  switch (kind_) {
    case Kind::kList:
      return list_->depth;
    case Kind::kDict:
      return dict_->depth;
    case Kind::kNamespace:
    case Kind::kCallable:
      return 1;
    default:
      return 0;
  }
}

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Result<Value>(Renderer&, CallArgs&)> fn;
};

// str(value) as Python prints it (undefined prints as ""). A list's or dict's str stops
// once it is longer than MaxBuiltSize() (renderer.h) instead of growing on: the callers that
// keep it (the output, `~`, join, format) find it too long and fail with TooLarge.
std::string ToPyStr(const Value& v);
// repr(value) as Python prints it inside containers.
std::string ToPyRepr(const Value& v);
// Python's float repr (shortest round-trip, "1e-05", "2.0").
std::string FormatPyFloat(double d);
// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys) as transformers' tojson.
// `indent` is the per-level indent string, nullopt for None.
Result<std::string> ToJson(const Value& v, const std::optional<std::string>& indent,
                           const std::string& item_sep, const std::string& key_sep, bool sort_keys,
                           bool ensure_ascii);
// Python ==.
bool PyEquals(const Value& a, const Value& b);
// A hash consistent with PyEquals: values it calls equal hash equal (1, 1.0 and True
// among them). Lists and dicts hash by content, namespaces and callables by identity.
size_t PyHash(const Value& v);
const char* KindName(const Value& v);  // Python type name for messages: 'dict object', ...
// A dict's (key, value) pairs as tuples, in its order (the items filter and dict.items()).
std::vector<Value> ItemPairs(const Value& dict);

// UTF-8 helpers: Python strings index code points. Invalid UTF-8 decodes one byte at a time
// as U+FFFD: a lone continuation byte, a truncated or malformed sequence.
// The code point at s[*i], moving *i past it (*i < s.size()).
char32_t NextCodePoint(std::string_view s, size_t* i);
std::vector<char32_t> DecodeUtf8(std::string_view s);
// The bytes AppendUtf8 writes for `c`.
size_t Utf8Length(char32_t c);
std::string EncodeUtf8(const std::u32string_view s);
void AppendUtf8(std::string& out, char32_t c);
bool IsPyWhitespace(char32_t c);
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);

// ---- tokens ------------------------------------------------------------------------

enum class Tok {
  kText,        // template data
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,
  kInt,
  kFloat,
  kOp,  // operator or punctuation, text in `text`
  kEof,
};

struct Token {
  Tok type;
  std::string text;
  int line;
  int64_t int_value = 0;
  double float_value = 0;
};

// Tokenizes `source` with jinja2's rules under trim_blocks + lstrip_blocks and
// keep_trailing_newline=False.
Result<std::vector<Token>> Lex(std::string_view source, const std::string& origin);

// ---- syntax tree -------------------------------------------------------------------

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,  // value
  kName,     // name
  kList,     // children
  kTuple,    // children
  kDict,     // keys (children at even) and values (odd)
  kGetAttr,  // children[0] . name
  kGetItem,  // children[0] [ children[1] ]
  kSlice,    // children[0] [ children[1] : children[2] : children[3] ] (null parts allowed)
  kCall,     // children[0] ( args )
  kFilter,   // children[0] | name ( args )
  kTest,     // children[0] is [not] name ( args )
  kUnary,    // op children[0]: "-", "+", "not"
  kBinary,   // children[0] op children[1]
  kAnd,
  kOr,
  kCondExpr,  // children[1] if children[0] else children[2] (children[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  std::string name;      // name, attribute, filter/test name, operator
  Value value;           // literal
  bool negated = false;  // `is not`
  std::vector<ExprPtr> children;
  std::vector<ExprPtr> args;                            // call/filter/test positional
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // call/filter/test keyword
  int depth = 1;  // levels of this tree, bounded by the parser (parser.cc: Sealed)
};

enum class StmtKind {
  kText,       // text
  kOutput,     // expr
  kIf,         // branches: (cond, body)...; else_body
  kFor,        // targets, iter, filter, body, else_body
  kSet,        // targets / attr target, expr or body (+ filters via expr on body)
  kMacro,      // name, params, defaults, body
  kCallBlock,  // call expr, caller params, body
  kFilterBlock,
  kBreak,
  kContinue,
  kTransparent,  // {% generation %}: body rendered as is
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;  // for / set names; set attr: {ns, attr}
  bool attr_target = false;
  ExprPtr filter;  // for ... if filter
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned with params (null where none)
};

struct Program {
  std::string origin;
  Body body;
};

Result<std::unique_ptr<Program>> ParseProgram(std::string_view source, std::string origin);

// Checks that every filter and test the program names exists; the error names the
// unsupported one and its line.
Status ValidateProgram(const Program& program);

// Renders `program` with `globals` (the template's variables), held to `limits`.
Result<std::string> RenderProgram(const Program& program, std::shared_ptr<Dict> globals,
                                  const RenderLimits& limits);

}  // namespace trace::engine::tmpl
