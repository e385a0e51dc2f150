// A byte-level grammar for constrained decoding: a recursive transition network. Each rule
// is a deterministic automaton over bytes whose edges either consume a byte range or call
// another rule (which returns to the edge's target state when it accepts); a rule may call
// itself through others (recursive JSON, $ref). One kind of rule is built in rather than
// spelled out in states: a JSON string literal with bounds on its length in characters
// (StringLexer), because that is where almost every token of a JSON output is decoded, and
// it lets the matcher decide most of the vocabulary there from precomputed tables.
//
// GrammarBuilder composes rules from regular expressions over bytes (literals, byte
// classes, sequences, alternatives, repetition, calls) and compiles each to a DFA by subset
// construction. The result is immutable and shared by every matcher using it.
//
// Ownership: a Grammar is a value (held by shared_ptr<const Grammar> once built); the
// builder owns its expressions until Build. Thread safety: a built Grammar is immutable;
// a builder is single-threaded. Errors: Build fails with InvalidArgument when a rule is
// declared but never defined, the automaton would exceed kMaxStates, or the root (or a rule
// passed to RequireFinite) matches no finite text. Build drops every alternative that
// cannot finish (productive.h), so no walk of a built grammar reaches a dead end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace trace::recorder::grammar {

// The JSON string lexer's state, packed into a 32-bit word (the matcher's frame state for
// a string rule): phase (before the opening quote, inside, done), escape progress, UTF-8
// continuation bytes still expected and their allowed range, and characters so far.
class StringLexer {
 public:
  static constexpr uint32_t kStart = 0;  // before the opening quote
  static constexpr uint32_t kInsideIdle = 1;
  static constexpr int32_t kMaxCount = (1 << 22) - 1;  // counts saturate here

  static bool Done(uint32_t s) { return (s & 3) == 2; }
  static bool Inside(uint32_t s) { return (s & 3) == 1; }
  // Inside, not within an escape or a multi-byte character: the next byte starts a
  // character or closes the string.
  static bool Idle(uint32_t s) { return (s & 0x3FF) == 1; }
  static int32_t Count(uint32_t s) { return static_cast<int32_t>(s >> 10); }
  // The state after `byte`, or false when the byte cannot come next. `max_chars` < 0: no
  // upper bound.
  static bool Step(uint32_t s, uint8_t byte, int32_t min_chars, int32_t max_chars, uint32_t* out);
};

struct ByteEdge {
  uint8_t lo, hi;  // inclusive
  int32_t to;      // global state index
};

struct CallEdge {
  int32_t rule;
  int32_t to;  // where the caller continues once the callee accepts
};

struct State {
  uint32_t bytes_begin = 0, bytes_end = 0;  // into Grammar::byte_edges, sorted, disjoint
  uint32_t calls_begin = 0, calls_end = 0;  // into Grammar::call_edges
  bool accepting = false;
};

struct Rule {
  enum Kind { kAutomaton, kString } kind = kAutomaton;
  std::string name;
  int32_t start = -1;                     // kAutomaton: global index of its start state
  int32_t min_chars = 0, max_chars = -1;  // kString (max < 0: unbounded)
};

class Grammar {
 public:
  std::vector<Rule> rules;
  std::vector<State> states;
  std::vector<ByteEdge> byte_edges;
  std::vector<CallEdge> call_edges;
  int32_t root = 0;

  // Whether the grammar accepts exactly `text` (a reference matcher over bytes; for tests
  // and tools, not for decoding).
  bool Accepts(std::string_view text) const;
  // A readable listing of the rules and states.
  std::string Describe() const;
};

class GrammarBuilder {
 public:
  using Expr = int32_t;
  static constexpr int32_t kMaxStates = 1 << 20;

  Expr Empty();
  Expr Bytes(uint8_t lo, uint8_t hi);
  Expr Class(const std::vector<std::pair<uint8_t, uint8_t>>& ranges);
  Expr Literal(std::string_view text);
  Expr Seq(std::vector<Expr> parts);
  Expr Alt(std::vector<Expr> options);
  Expr Star(Expr e);
  Expr Plus(Expr e);
  Expr Opt(Expr e);
  // e repeated min..max times (max < 0: unbounded); bounded repetition is unrolled.
  Expr Repeat(Expr e, int32_t min, int32_t max);
  Expr Call(int32_t rule);

  // A rule defined later (so rules can refer to each other).
  int32_t DeclareRule(std::string name);
  void DefineRule(int32_t rule, Expr body);
  // The JSON string rule with a length in characters in [min_chars, max_chars] (max < 0:
  // unbounded); one per distinct bound pair.
  int32_t StringRule(int32_t min_chars, int32_t max_chars);
  // Build fails with "WHERE: WHAT" unless `rule` matches some finite text: a schema that
  // only recurses ({"$ref": "#"}) is the client's error, named where the client wrote it,
  // not an alternative to drop without a word.
  void RequireFinite(int32_t rule, std::string where, std::string what);

  Result<std::shared_ptr<const Grammar>> Build(int32_t root);

 private:
  struct Node {
    enum Kind { kEmpty, kBytes, kSeq, kAlt, kStar, kCall } kind;
    uint8_t lo = 0, hi = 0;
    int32_t rule = -1;
    std::vector<Expr> kids = {};
  };
  struct RuleDef {
    Rule rule;
    Expr body = -1;
  };
  Expr Add(Node n);

  struct Requirement {
    int32_t rule;
    std::string where, what;
  };

  std::vector<Node> nodes_;
  std::vector<RuleDef> rules_;
  std::vector<Requirement> finite_;
};

}  // namespace trace::recorder::grammar
