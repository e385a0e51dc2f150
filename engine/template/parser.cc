// Template parser: jinja2's grammar (jinja2/parser.py) for the statements and
// expressions chat templates use. Anything else is an error naming the construct and line.
#include <algorithm>
#include <set>
#include <string>

#include "base/escape.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {
namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& origin)
      : toks_(std::move(tokens)), origin_(origin) {}

  Result<Body> ParseTemplate() {
    Body body;
    std::string end;
    TRACE_RETURN_IF_ERROR(ParseBody(&body, {}, &end));
    return body;
  }

 private:
  const Token& Cur() const { return toks_[pos_]; }
  const Token& Peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == Tok::kName && Cur().text == name; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }

  Status Error(const std::string& what, int line = -1) const {
    return InvalidArgument("template " + origin_ + " line " +
                           std::to_string(line < 0 ? Cur().line : line) + ": " + what);
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case Tok::kText:
        return "template data";
      case Tok::kVarBegin:
        return "'{{'";
      case Tok::kVarEnd:
        return "'}}'";
      case Tok::kBlockBegin:
        return "'{%'";
      case Tok::kBlockEnd:
        return "'%}'";
      case Tok::kName:
        return "'" + EscapeForDisplay(t.text) + "'";
      case Tok::kString:
        return "string literal";
      case Tok::kInt:
      case Tok::kFloat:
        return "number " + EscapeForDisplay(t.text);
      case Tok::kOp:
        return "'" + EscapeForDisplay(t.text) + "'";
      case Tok::kEof:
        return "end of template";
    }
    return "token";
  }
  Status ExpectOp(const char* op) {
    if (SkipOp(op)) return Status::Ok();
    return Error(std::string("expected '") + op + "', got " + Describe(Cur()));
  }
  Status ExpectBlockEnd() {
    if (Cur().type == Tok::kBlockEnd) {
      Next();
      return Status::Ok();
    }
    return Error("expected '%}', got " + Describe(Cur()));
  }
  Result<std::string> ExpectName() {
    if (Cur().type != Tok::kName) return Error("expected a name, got " + Describe(Cur()));
    std::string n = Cur().text;
    Next();
    return n;
  }

  // Parses statements until a block tag whose keyword is in `ends`; leaves the parser
  // just after that keyword and stores it in *end. Empty `ends` parses to end of input.
  Status ParseBody(Body* body, const std::set<std::string>& ends, std::string* end) {
    while (true) {
      const Token& t = Cur();
      if (t.type == Tok::kEof) {
        if (ends.empty()) return Status::Ok();
        std::string expected;
        for (const auto& e : ends) expected += (expected.empty() ? "" : " or ") + ("'" + e + "'");
        return Error("unexpected end of template, expected " + expected);
      }
      if (t.type == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = t.line;
        s->text = t.text;
        body->push_back(std::move(s));
        Next();
        continue;
      }
      if (t.type == Tok::kVarBegin) {
        int line = t.line;
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = line;
        TRACE_ASSIGN_OR_RETURN(s->expr, ParseTupleExpr());
        if (Cur().type != Tok::kVarEnd) return Error("expected '}}', got " + Describe(Cur()));
        Next();
        body->push_back(std::move(s));
        continue;
      }
      if (t.type != Tok::kBlockBegin) return Error("unexpected " + Describe(t));
      Next();
      if (Cur().type != Tok::kName)
        return Error("expected a statement name, got " + Describe(Cur()));
      std::string keyword = Cur().text;
      if (ends.count(keyword)) {
        Next();
        *end = keyword;
        return Status::Ok();
      }
      TRACE_ASSIGN_OR_RETURN(StmtPtr stmt, ParseStatement());
      body->push_back(std::move(stmt));
    }
  }

  Result<StmtPtr> ParseStatement() {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return Error("template nested too deeply");
    const std::string keyword = Cur().text;
    int line = Cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    Next();
    if (keyword == "if") {
      s->kind = StmtKind::kIf;
      while (true) {
        TRACE_ASSIGN_OR_RETURN(ExprPtr cond, ParseTupleExpr());
        TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
        Body body;
        std::string end;
        TRACE_RETURN_IF_ERROR(ParseBody(&body, {"elif", "else", "endif"}, &end));
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") continue;
        if (end == "else") {
          TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
          TRACE_RETURN_IF_ERROR(ParseBody(&s->else_body, {"endif"}, &end));
        }
        TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
    }
    if (keyword == "for") {
      s->kind = StmtKind::kFor;
      TRACE_RETURN_IF_ERROR(ParseNameTargets(&s->targets));
      if (!SkipName("in")) return Error("expected 'in' in for loop, got " + Describe(Cur()));
      TRACE_ASSIGN_OR_RETURN(s->expr, ParseTupleExpr(/*no_condexpr=*/true));
      if (SkipName("if")) {
        TRACE_ASSIGN_OR_RETURN(s->filter, ParseExpression());
      }
      if (IsName("recursive")) return Error("unsupported construct: recursive for loop");
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      TRACE_RETURN_IF_ERROR(ParseBody(&s->body, {"else", "endfor"}, &end));
      if (end == "else") {
        TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
        TRACE_RETURN_IF_ERROR(ParseBody(&s->else_body, {"endfor"}, &end));
      }
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (keyword == "set") {
      s->kind = StmtKind::kSet;
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == ".") {
        std::string ns = Cur().text;
        Next();
        Next();
        TRACE_ASSIGN_OR_RETURN(std::string attr, ExpectName());
        s->targets = {ns, attr};
        s->attr_target = true;
      } else {
        TRACE_RETURN_IF_ERROR(ParseNameTargets(&s->targets));
      }
      if (SkipOp("=")) {
        TRACE_ASSIGN_OR_RETURN(s->expr, ParseTupleExpr());
        TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      // Block set: {% set x %}...{% endset %}, optionally {% set x | filter %}.
      if (s->targets.size() != 1 || s->attr_target) {
        return Error("block set takes exactly one name");
      }
      if (IsOp("|")) {
        // The filter chain is applied to a placeholder name holding the body's text.
        auto placeholder = std::make_unique<Expr>();
        placeholder->kind = ExprKind::kName;
        placeholder->name = " block ";
        placeholder->line = line;
        TRACE_ASSIGN_OR_RETURN(s->expr, ParseFilterChain(std::move(placeholder)));
      }
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      TRACE_RETURN_IF_ERROR(ParseBody(&s->body, {"endset"}, &end));
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (keyword == "macro") {
      s->kind = StmtKind::kMacro;
      TRACE_ASSIGN_OR_RETURN(s->text, ExpectName());
      TRACE_RETURN_IF_ERROR(ParseSignature(s.get()));
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      TRACE_RETURN_IF_ERROR(ParseBody(&s->body, {"endmacro"}, &end));
      if (Cur().type == Tok::kName) Next();  // {% endmacro name %}
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (keyword == "call") {
      s->kind = StmtKind::kCallBlock;
      if (IsOp("(")) TRACE_RETURN_IF_ERROR(ParseSignature(s.get()));
      TRACE_ASSIGN_OR_RETURN(s->expr, ParseExpression());
      if (s->expr->kind != ExprKind::kCall) return Error("expected a call after 'call'", line);
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      TRACE_RETURN_IF_ERROR(ParseBody(&s->body, {"endcall"}, &end));
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (keyword == "filter") {
      s->kind = StmtKind::kFilterBlock;
      auto placeholder = std::make_unique<Expr>();
      placeholder->kind = ExprKind::kName;
      placeholder->name = " block ";
      placeholder->line = line;
      ExprPtr node = std::move(placeholder);
      do {
        TRACE_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
      } while (SkipOp("|"));
      s->expr = std::move(node);
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      TRACE_RETURN_IF_ERROR(ParseBody(&s->body, {"endfilter"}, &end));
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (keyword == "break" || keyword == "continue") {
      s->kind = keyword == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (keyword == "generation") {
      // transformers' AssistantTracker: marks assistant text; renders its body as is.
      s->kind = StmtKind::kTransparent;
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      TRACE_RETURN_IF_ERROR(ParseBody(&s->body, {"endgeneration"}, &end));
      TRACE_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    static const std::set<std::string> kKnownUnsupported = {
        "include", "import",     "from", "extends", "block",
        "with",    "autoescape", "do",   "trans",   "pluralize"};
    if (kKnownUnsupported.count(keyword)) {
      return Error("unsupported construct: '" + keyword + "' statement", line);
    }
    return Error("unknown statement '" + keyword + "'", line);
  }

  Status ParseNameTargets(std::vector<std::string>* targets) {
    bool paren = SkipOp("(");
    while (true) {
      TRACE_ASSIGN_OR_RETURN(std::string n, ExpectName());
      targets->push_back(n);
      if (!SkipOp(",")) break;
      if (Cur().type != Tok::kName) break;
    }
    if (paren) TRACE_RETURN_IF_ERROR(ExpectOp(")"));
    return Status::Ok();
  }

  Status ParseSignature(Stmt* s) {
    TRACE_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!s->params.empty()) TRACE_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      TRACE_ASSIGN_OR_RETURN(std::string n, ExpectName());
      s->params.push_back(n);
      if (SkipOp("=")) {
        TRACE_ASSIGN_OR_RETURN(ExprPtr d, ParseExpression());
        s->defaults.push_back(std::move(d));
      } else {
        s->defaults.push_back(nullptr);
      }
    }
    Next();
    return Status::Ok();
  }

  // ---- expressions ----

  ExprPtr Make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Every composite expression passes here once its operands are attached: its depth is
  // one more than its deepest operand's, and past kMaxExprDepth the template is refused.
  // Chains such as `a + b + ...`, `a.b.c...` or `x|f|g...` nest without recursing in the
  // parser (so kMaxDepth does not see them), while the renderer, the validator and ~Expr
  // recurse once per level: a 200,000-term sum overflowed the stack (template_fuzz).
  Result<ExprPtr> Sealed(ExprPtr e) {
    int deepest = 0;
    for (const auto& c : e->children) {
      if (c) deepest = std::max(deepest, c->depth);
    }
    for (const auto& a : e->args) deepest = std::max(deepest, a->depth);
    for (const auto& [key, v] : e->kwargs) deepest = std::max(deepest, v->depth);
    e->depth = deepest + 1;
    if (e->depth > kMaxExprDepth) {
      return Error("expression nested too deeply (more than " + std::to_string(kMaxExprDepth) +
                   " levels of operators, attributes, calls or filters)");
    }
    return e;
  }

  // An expression, or a bare tuple `a, b` (as in {{ a, b }} and set x = a, b).
  Result<ExprPtr> ParseTupleExpr(bool no_condexpr = false) {
    int line = Cur().line;
    ExprPtr first;
    if (no_condexpr) {
      TRACE_ASSIGN_OR_RETURN(first, ParseOr());
    } else {
      TRACE_ASSIGN_OR_RETURN(first, ParseExpression());
    }
    if (!IsOp(",")) return first;
    auto tuple = Make(ExprKind::kTuple, line);
    tuple->children.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd || IsOp(")") || IsName("if")) {
        break;
      }
      ExprPtr next;
      if (no_condexpr) {
        TRACE_ASSIGN_OR_RETURN(next, ParseOr());
      } else {
        TRACE_ASSIGN_OR_RETURN(next, ParseExpression());
      }
      tuple->children.push_back(std::move(next));
    }
    return Sealed(std::move(tuple));
  }

  // Nesting limit standing in for Python's recursion limit (jinja2 raises RecursionError).
  static constexpr int kMaxDepth = 200;
  // The deepest expression tree (Sealed): as deep as kMaxDepth allows by recursion.
  static constexpr int kMaxExprDepth = 200;
  struct DepthGuard {
    explicit DepthGuard(int* d) : depth(d) { ++*depth; }
    ~DepthGuard() { --*depth; }
    int* depth;
  };
  int depth_ = 0;

  Result<ExprPtr> ParseExpression() {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return Error("template nested too deeply");
    TRACE_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (IsName("if")) {
      int line = Cur().line;
      Next();
      TRACE_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        TRACE_ASSIGN_OR_RETURN(otherwise, ParseExpression());
      }
      auto c = Make(ExprKind::kCondExpr, line);
      c->children.push_back(std::move(cond));
      c->children.push_back(std::move(expr));
      c->children.push_back(std::move(otherwise));
      TRACE_ASSIGN_OR_RETURN(expr, Sealed(std::move(c)));
    }
    return expr;
  }

  Result<ExprPtr> ParseOr() {
    TRACE_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      int line = Cur().line;
      Next();
      TRACE_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      auto e = Make(ExprKind::kOr, line);
      e->children.push_back(std::move(left));
      e->children.push_back(std::move(right));
      TRACE_ASSIGN_OR_RETURN(left, Sealed(std::move(e)));
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    TRACE_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      int line = Cur().line;
      Next();
      TRACE_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      auto e = Make(ExprKind::kAnd, line);
      e->children.push_back(std::move(left));
      e->children.push_back(std::move(right));
      TRACE_ASSIGN_OR_RETURN(left, Sealed(std::move(e)));
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return Error("template nested too deeply");
    if (IsName("not")) {
      int line = Cur().line;
      Next();
      TRACE_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      auto e = Make(ExprKind::kUnary, line);
      e->name = "not";
      e->children.push_back(std::move(operand));
      return Sealed(std::move(e));
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    TRACE_ASSIGN_OR_RETURN(ExprPtr left, ParseMath1());
    // Chained comparisons (a < b < c) are folded as Python does: a < b and b < c is rare
    // in templates; we evaluate left-to-right pairwise like jinja2's Compare node.
    while (true) {
      int line = Cur().line;
      std::string op;
      if (Cur().type == Tok::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == ">" ||
           Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      TRACE_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
      auto e = Make(ExprKind::kBinary, line);
      e->name = op;
      e->children.push_back(std::move(left));
      e->children.push_back(std::move(right));
      TRACE_ASSIGN_OR_RETURN(left, Sealed(std::move(e)));
    }
    return left;
  }

  Result<ExprPtr> ParseBinaryLevel(const std::set<std::string>& ops,
                                   Result<ExprPtr> (Parser::*next)()) {
    TRACE_ASSIGN_OR_RETURN(ExprPtr left, (this->*next)());
    while (Cur().type == Tok::kOp && ops.count(Cur().text)) {
      auto e = Make(ExprKind::kBinary, Cur().line);
      e->name = Cur().text;
      Next();
      TRACE_ASSIGN_OR_RETURN(ExprPtr right, (this->*next)());
      e->children.push_back(std::move(left));
      e->children.push_back(std::move(right));
      TRACE_ASSIGN_OR_RETURN(left, Sealed(std::move(e)));
    }
    return left;
  }
  Result<ExprPtr> ParseMath1() { return ParseBinaryLevel({"+", "-"}, &Parser::ParseConcat); }
  Result<ExprPtr> ParseConcat() { return ParseBinaryLevel({"~"}, &Parser::ParseMath2); }
  Result<ExprPtr> ParseMath2() {
    return ParseBinaryLevel({"*", "/", "//", "%"}, &Parser::ParsePow);
  }
  Result<ExprPtr> ParsePow() { return ParseBinaryLevel({"**"}, &Parser::ParseUnaryFiltered); }
  Result<ExprPtr> ParseUnaryFiltered() { return ParseUnary(true); }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return Error("template nested too deeply");
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto e = Make(ExprKind::kUnary, Cur().line);
      e->name = Cur().text;
      Next();
      TRACE_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      e->children.push_back(std::move(operand));
      TRACE_ASSIGN_OR_RETURN(node, Sealed(std::move(e)));
    } else {
      TRACE_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    TRACE_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      TRACE_ASSIGN_OR_RETURN(node, ParseFilterChain(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    int line = t.line;
    if (t.type == Tok::kName) {
      std::string n = t.text;
      Next();
      auto e = Make(ExprKind::kLiteral, line);
      if (n == "true" || n == "True") {
        e->value = Value::Bool(true);
      } else if (n == "false" || n == "False") {
        e->value = Value::Bool(false);
      } else if (n == "none" || n == "None") {
        e->value = Value::None();
      } else {
        e->kind = ExprKind::kName;
        e->name = n;
      }
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s = t.text;
      Next();
      while (Cur().type == Tok::kString) {  // adjacent literals concatenate
        s += Cur().text;
        Next();
      }
      auto e = Make(ExprKind::kLiteral, line);
      e->value = Value::Str(std::move(s));
      return e;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto e = Make(ExprKind::kLiteral, line);
      e->value = t.type == Tok::kInt ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (SkipOp(")")) return Make(ExprKind::kTuple, line);
      TRACE_ASSIGN_OR_RETURN(ExprPtr inner, ParseExpression());
      if (IsOp(",")) {
        auto tuple = Make(ExprKind::kTuple, line);
        tuple->children.push_back(std::move(inner));
        while (SkipOp(",")) {
          if (IsOp(")")) break;
          TRACE_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
          tuple->children.push_back(std::move(item));
        }
        TRACE_ASSIGN_OR_RETURN(inner, Sealed(std::move(tuple)));
      }
      TRACE_RETURN_IF_ERROR(ExpectOp(")"));
      return inner;
    }
    if (IsOp("[")) {
      Next();
      auto list = Make(ExprKind::kList, line);
      while (!IsOp("]")) {
        if (!list->children.empty()) TRACE_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp("]")) break;
        TRACE_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
        list->children.push_back(std::move(item));
      }
      Next();
      return Sealed(std::move(list));
    }
    if (IsOp("{")) {
      Next();
      auto dict = Make(ExprKind::kDict, line);
      while (!IsOp("}")) {
        if (!dict->children.empty()) TRACE_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp("}")) break;
        TRACE_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
        TRACE_RETURN_IF_ERROR(ExpectOp(":"));
        TRACE_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        dict->children.push_back(std::move(key));
        dict->children.push_back(std::move(value));
      }
      Next();
      return Sealed(std::move(dict));
    }
    return Error("unexpected " + Describe(t) + " in expression");
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".")) {
        int line = Cur().line;
        Next();
        auto e = Make(ExprKind::kGetAttr, line);
        if (Cur().type == Tok::kName) {
          e->name = Cur().text;
        } else if (Cur().type == Tok::kInt) {
          // `x.0` is an item lookup in jinja2.
          e->kind = ExprKind::kGetItem;
          auto idx = Make(ExprKind::kLiteral, line);
          idx->value = Value::Int(Cur().int_value);
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(idx));
          Next();
          TRACE_ASSIGN_OR_RETURN(node, Sealed(std::move(e)));
          continue;
        } else {
          return Error("expected an attribute name after '.', got " + Describe(Cur()));
        }
        Next();
        e->children.push_back(std::move(node));
        TRACE_ASSIGN_OR_RETURN(node, Sealed(std::move(e)));
      } else if (IsOp("[")) {
        int line = Cur().line;
        Next();
        TRACE_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node), line));
      } else if (IsOp("(")) {
        TRACE_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    bool is_slice = false;
    int part = 0;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        is_slice = true;
        if (++part > 2) return Error("too many ':' in slice");
        Next();
        continue;
      }
      if (parts[part]) return Error("expected ']' or ':', got " + Describe(Cur()));
      TRACE_ASSIGN_OR_RETURN(parts[part], ParseExpression());
      if (IsOp(",")) return Error("unsupported construct: tuple subscript");
    }
    Next();
    if (!is_slice) {
      if (!parts[0]) return Error("empty subscript", line);
      auto e = Make(ExprKind::kGetItem, line);
      e->children.push_back(std::move(target));
      e->children.push_back(std::move(parts[0]));
      return Sealed(std::move(e));
    }
    auto e = Make(ExprKind::kSlice, line);
    e->children.push_back(std::move(target));
    for (auto& p : parts) e->children.push_back(std::move(p));
    return Sealed(std::move(e));
  }

  Status ParseArgs(Expr* e) {
    TRACE_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) TRACE_RETURN_IF_ERROR(ExpectOp(","));
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) return Error("unsupported construct: *args / **kwargs in call");
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        TRACE_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
        e->kwargs.emplace_back(key, std::move(v));
      } else {
        if (!e->kwargs.empty()) return Error("positional argument after keyword argument");
        TRACE_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
        e->args.push_back(std::move(v));
      }
    }
    Next();
    return Status::Ok();
  }

  Result<ExprPtr> ParseCall(ExprPtr callee) {
    auto e = Make(ExprKind::kCall, Cur().line);
    e->children.push_back(std::move(callee));
    TRACE_RETURN_IF_ERROR(ParseArgs(e.get()));
    return Sealed(std::move(e));
  }

  // After the '|' has been consumed.
  Result<ExprPtr> ParseFilter(ExprPtr node) {
    auto e = Make(ExprKind::kFilter, Cur().line);
    TRACE_ASSIGN_OR_RETURN(e->name, ExpectName());
    while (IsOp(".")) {  // dotted filter names
      Next();
      TRACE_ASSIGN_OR_RETURN(std::string part, ExpectName());
      e->name += "." + part;
    }
    e->children.push_back(std::move(node));
    if (IsOp("(")) TRACE_RETURN_IF_ERROR(ParseArgs(e.get()));
    return Sealed(std::move(e));
  }

  Result<ExprPtr> ParseFilterChain(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        Next();
        TRACE_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
      } else if (IsName("is")) {
        TRACE_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        TRACE_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseTest(ExprPtr node) {
    auto e = Make(ExprKind::kTest, Cur().line);
    Next();  // is
    if (SkipName("not")) e->negated = true;
    TRACE_ASSIGN_OR_RETURN(e->name, ExpectName());
    e->children.push_back(std::move(node));
    if (IsOp("(")) {
      TRACE_RETURN_IF_ERROR(ParseArgs(e.get()));
    } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString || Cur().type == Tok::kInt ||
                Cur().type == Tok::kFloat || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Error("you cannot chain multiple tests with is");
      TRACE_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      TRACE_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->args.push_back(std::move(arg));
    }
    return Sealed(std::move(e));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  const std::string& origin_;
};

}  // namespace

Result<std::unique_ptr<Program>> ParseProgram(std::string_view source, std::string origin) {
  auto program = std::make_unique<Program>();
  program->origin = std::move(origin);
  TRACE_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source, program->origin));
  Parser parser(std::move(tokens), program->origin);
  TRACE_ASSIGN_OR_RETURN(program->body, parser.ParseTemplate());
  return program;
}

}  // namespace trace::engine::tmpl
