#include "recorder/grammar/grammar.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/escape.h"
#include "recorder/grammar/productive.h"

namespace trace::recorder::grammar {

// ---- StringLexer -------------------------------------------------------------------------
//
// bits 0-1 phase (0 start, 1 inside, 2 done); 2-4 escape (0 none, 1 after '\', 2..5 hex
// digits of \uXXXX still to come: 2 means 4; 6 the second digit after "\uD"; 7 within
// the "\uDC.." that must follow a high surrogate); 5-6 UTF-8 continuation bytes expected;
// 7-9 the range of the next continuation byte (0 80-BF, 1 A0-BF, 2 80-9F, 3 90-BF,
// 4 80-8F: what keeps the character well-formed, no overlongs or surrogates), or, within
// an escape, where a surrogate pair stands (1 high surrogate's digits, 2..5 expecting the
// '\', 'u', 'D' and C-F of the low one); 10-31 count. Surrogate escapes come in pairs, a
// high one then a low one, and count as one character: a lone "\uD812" is refused by most
// JSON parsers (nlohmann's among them), so the grammar does not let a model write one.

namespace {

uint32_t Pack(uint32_t phase, uint32_t esc, uint32_t rem, uint32_t cons, uint32_t count) {
  return phase | (esc << 2) | (rem << 5) | (cons << 7) | (count << 10);
}

bool IsHex(uint8_t b) {
  return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
}

// Whether hex digit `b` is within lo..hi (lowercase letters given; either case matches).
bool HexIn(uint8_t b, char lo, char hi) {
  const uint8_t lower = b >= 'A' && b <= 'F' ? static_cast<uint8_t>(b - 'A' + 'a') : b;
  return IsHex(b) && lower >= lo && lower <= hi;
}

}  // namespace

bool StringLexer::Step(uint32_t s, uint8_t b, int32_t min_chars, int32_t max_chars, uint32_t* out) {
  const uint32_t phase = s & 3, esc = (s >> 2) & 7, rem = (s >> 5) & 3, cons = (s >> 7) & 7;
  uint32_t count = s >> 10;
  if (phase == 0) {
    if (b != '"') return false;
    *out = Pack(1, 0, 0, 0, 0);
    return true;
  }
  if (phase != 1) return false;
  if (rem > 0) {
    static constexpr uint8_t kLo[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
    static constexpr uint8_t kHi[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    if (b < kLo[cons] || b > kHi[cons]) return false;
    *out = Pack(1, 0, rem - 1, 0, count);
    return true;
  }
  if (esc == 1) {
    if (b == 'u') {
      *out = Pack(1, 2, 0, 0, count);
      return true;
    }
    if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' ||
        b == 't') {
      *out = Pack(1, 0, 0, 0, count);
      return true;
    }
    return false;
  }
  const uint32_t pair = cons;  // within an escape the cons bits track a surrogate pair
  if (esc == 7) {              // after a high surrogate: "\uDC00".."\uDFFF" must follow
    const bool ok = pair == 2   ? b == '\\'
                    : pair == 3 ? b == 'u'
                    : pair == 4 ? b == 'D' || b == 'd'
                                : HexIn(b, 'c', 'f');
    if (!ok) return false;
    *out = pair == 5 ? Pack(1, 4, 0, 0, count) : Pack(1, 7, 0, pair + 1, count);
    return true;
  }
  if (esc == 6) {  // "\uD" then: 0-7 an ordinary character, 8-B a high surrogate
    if (HexIn(b, '0', '7')) {
      *out = Pack(1, 4, 0, 0, count);
    } else if (HexIn(b, '8', 'b')) {
      *out = Pack(1, 4, 0, 1, count);
    } else {
      return false;  // C-F: a low surrogate with no high one before it
    }
    return true;
  }
  if (esc >= 2) {
    if (!IsHex(b)) return false;
    if (esc == 2 && (b == 'D' || b == 'd')) {
      *out = Pack(1, 6, 0, 0, count);
    } else if (esc == 5) {
      *out = pair == 1 ? Pack(1, 7, 0, 2, count) : Pack(1, 0, 0, 0, count);
    } else {
      *out = Pack(1, esc + 1, 0, pair, count);
    }
    return true;
  }
  if (b == '"') {
    if (static_cast<int32_t>(count) < min_chars) return false;
    *out = Pack(2, 0, 0, 0, count);
    return true;
  }
  // Every other byte starts a character.
  if (max_chars >= 0 && static_cast<int32_t>(count) >= max_chars) return false;
  if (count < static_cast<uint32_t>(kMaxCount)) ++count;
  if (b == '\\') {
    *out = Pack(1, 1, 0, 0, count);
    return true;
  }
  if (b < 0x20) return false;  // control characters must be escaped
  if (b < 0x80) {
    *out = Pack(1, 0, 0, 0, count);
    return true;
  }
  if (b >= 0xC2 && b <= 0xDF) {
    *out = Pack(1, 0, 1, 0, count);
  } else if (b == 0xE0) {
    *out = Pack(1, 0, 2, 1, count);
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    *out = Pack(1, 0, 2, 0, count);
  } else if (b == 0xED) {
    *out = Pack(1, 0, 2, 2, count);
  } else if (b == 0xF0) {
    *out = Pack(1, 0, 3, 3, count);
  } else if (b >= 0xF1 && b <= 0xF3) {
    *out = Pack(1, 0, 3, 0, count);
  } else if (b == 0xF4) {
    *out = Pack(1, 0, 3, 4, count);
  } else {
    return false;
  }
  return true;
}

// ---- Builder -------------------------------------------------------------------------------

GrammarBuilder::Expr GrammarBuilder::Add(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<Expr>(nodes_.size() - 1);
}

GrammarBuilder::Expr GrammarBuilder::Empty() {
  return Add({Node::kEmpty});
}

GrammarBuilder::Expr GrammarBuilder::Bytes(uint8_t lo, uint8_t hi) {
  Node n{Node::kBytes};
  n.lo = lo;
  n.hi = hi;
  return Add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::Class(const std::vector<std::pair<uint8_t, uint8_t>>& ranges) {
  std::vector<Expr> options;
  for (const auto& [lo, hi] : ranges) options.push_back(Bytes(lo, hi));
  return Alt(std::move(options));
}

GrammarBuilder::Expr GrammarBuilder::Literal(std::string_view text) {
  std::vector<Expr> parts;
  for (char c : text) {
    uint8_t b = static_cast<uint8_t>(c);
    parts.push_back(Bytes(b, b));
  }
  return Seq(std::move(parts));
}

GrammarBuilder::Expr GrammarBuilder::Seq(std::vector<Expr> parts) {
  if (parts.empty()) return Empty();
  if (parts.size() == 1) return parts[0];
  Node n{Node::kSeq};
  n.kids = std::move(parts);
  return Add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::Alt(std::vector<Expr> options) {
  if (options.size() == 1) return options[0];
  Node n{Node::kAlt};
  n.kids = std::move(options);  // empty: matches nothing
  return Add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::Star(Expr e) {
  Node n{Node::kStar};
  n.kids = {e};
  return Add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::Plus(Expr e) {
  return Seq({e, Star(e)});
}

GrammarBuilder::Expr GrammarBuilder::Opt(Expr e) {
  return Alt({e, Empty()});
}

GrammarBuilder::Expr GrammarBuilder::Repeat(Expr e, int32_t min, int32_t max) {
  std::vector<Expr> parts(static_cast<size_t>(std::max(min, 0)), e);
  if (max < 0) {
    parts.push_back(Star(e));
  } else if (max > min) {
    // Nested options: e (e (e)?)?)? keeps the automaton linear in max - min.
    Expr tail = Opt(e);
    for (int32_t i = min + 1; i < max; ++i) tail = Opt(Seq({e, tail}));
    parts.push_back(tail);
  }
  return Seq(std::move(parts));
}

GrammarBuilder::Expr GrammarBuilder::Call(int32_t rule) {
  Node n{Node::kCall};
  n.rule = rule;
  return Add(std::move(n));
}

int32_t GrammarBuilder::DeclareRule(std::string name) {
  RuleDef d;
  d.rule.name = std::move(name);
  rules_.push_back(std::move(d));
  return static_cast<int32_t>(rules_.size() - 1);
}

void GrammarBuilder::DefineRule(int32_t rule, Expr body) {
  rules_[rule].body = body;
}

void GrammarBuilder::RequireFinite(int32_t rule, std::string where, std::string what) {
  finite_.push_back({rule, std::move(where), std::move(what)});
}

int32_t GrammarBuilder::StringRule(int32_t min_chars, int32_t max_chars) {
  if (max_chars < 0) max_chars = -1;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const Rule& r = rules_[i].rule;
    if (r.kind == Rule::kString && r.min_chars == min_chars && r.max_chars == max_chars) {
      return static_cast<int32_t>(i);
    }
  }
  RuleDef d;
  d.rule.kind = Rule::kString;
  d.rule.min_chars = min_chars;
  d.rule.max_chars = max_chars;
  d.rule.name = "string{" + std::to_string(min_chars) + "," +
                (max_chars < 0 ? std::string() : std::to_string(max_chars)) + "}";
  rules_.push_back(std::move(d));
  return static_cast<int32_t>(rules_.size() - 1);
}

namespace {

// Thompson NFA of one rule.
struct Nfa {
  struct St {
    std::vector<int32_t> eps;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
  };
  std::vector<St> st;
  int32_t New() {
    st.emplace_back();
    return static_cast<int32_t>(st.size() - 1);
  }
};

}  // namespace

Result<std::shared_ptr<const Grammar>> GrammarBuilder::Build(int32_t root) {
  auto g = std::make_shared<Grammar>();
  g->root = root;
  for (size_t r = 0; r < rules_.size(); ++r) {
    RuleDef& def = rules_[r];
    g->rules.push_back(def.rule);
    if (def.rule.kind == Rule::kString) continue;
    if (def.body < 0)
      return InvalidArgument("grammar: rule " + EscapePathForDisplay(def.rule.name) +
                             " is never defined");

    // Thompson construction (iterative over the expression DAG; each use gets its states).
    Nfa nfa;
    const int32_t start = nfa.New(), accept = nfa.New();
    struct Work {
      Expr e;
      int32_t from, to;
    };
    std::vector<Work> work = {{def.body, start, accept}};
    while (!work.empty()) {
      Work w = work.back();
      work.pop_back();
      const Node& n = nodes_[w.e];
      switch (n.kind) {
        case Node::kEmpty:
          nfa.st[w.from].eps.push_back(w.to);
          break;
        case Node::kBytes:
          nfa.st[w.from].bytes.push_back({n.lo, n.hi, w.to});
          break;
        case Node::kCall:
          nfa.st[w.from].calls.push_back({n.rule, w.to});
          break;
        case Node::kSeq: {
          int32_t cur = w.from;
          for (size_t i = 0; i < n.kids.size(); ++i) {
            int32_t next = i + 1 == n.kids.size() ? w.to : nfa.New();
            work.push_back({n.kids[i], cur, next});
            cur = next;
          }
          break;
        }
        case Node::kAlt:
          for (Expr k : n.kids) work.push_back({k, w.from, w.to});
          break;
        case Node::kStar: {
          int32_t loop = nfa.New();
          nfa.st[w.from].eps.push_back(loop);
          nfa.st[loop].eps.push_back(w.to);
          work.push_back({n.kids[0], loop, loop});
          break;
        }
      }
      if (nfa.st.size() > static_cast<size_t>(kMaxStates)) {
        return InvalidArgument("grammar: rule " + EscapePathForDisplay(def.rule.name) +
                               " is too large to compile");
      }
    }

    // Subset construction: deterministic on bytes; calls grouped by callee.
    auto closure = [&](std::vector<int32_t> set) {
      std::vector<int32_t> stack = set;
      std::set<int32_t> seen(set.begin(), set.end());
      while (!stack.empty()) {
        int32_t s = stack.back();
        stack.pop_back();
        for (int32_t t : nfa.st[s].eps) {
          if (seen.insert(t).second) stack.push_back(t);
        }
      }
      return std::vector<int32_t>(seen.begin(), seen.end());
    };
    std::map<std::vector<int32_t>, int32_t> ids;
    std::vector<std::vector<int32_t>> sets;
    auto intern = [&](std::vector<int32_t> set) {
      auto [it, inserted] = ids.emplace(set, static_cast<int32_t>(sets.size()));
      if (inserted) sets.push_back(std::move(set));
      return it->second;
    };
    intern(closure({start}));
    const int32_t base = static_cast<int32_t>(g->states.size());
    g->rules.back().start = base;
    struct Pending {
      std::vector<ByteEdge> bytes;
      std::vector<CallEdge> calls;
      bool accepting;
    };
    std::vector<Pending> out;
    for (size_t d = 0; d < sets.size(); ++d) {
      const std::vector<int32_t> set = sets[d];
      Pending p;
      p.accepting = std::binary_search(set.begin(), set.end(), accept);
      // Elementary byte intervals from every range's boundaries.
      std::vector<int> cuts;
      for (int32_t s : set) {
        for (const ByteEdge& e : nfa.st[s].bytes) {
          cuts.push_back(e.lo);
          cuts.push_back(e.hi + 1);
        }
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        int lo = cuts[i], hi = cuts[i + 1] - 1;
        std::vector<int32_t> target;
        for (int32_t s : set) {
          for (const ByteEdge& e : nfa.st[s].bytes) {
            if (e.lo <= lo && hi <= e.hi) target.push_back(e.to);
          }
        }
        if (target.empty()) continue;
        int32_t to = base + intern(closure(target));
        if (!p.bytes.empty() && p.bytes.back().to == to && p.bytes.back().hi + 1 == lo) {
          p.bytes.back().hi = static_cast<uint8_t>(hi);
        } else {
          p.bytes.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), to});
        }
      }
      std::map<int32_t, std::vector<int32_t>> by_callee;
      for (int32_t s : set) {
        for (const CallEdge& c : nfa.st[s].calls) by_callee[c.rule].push_back(c.to);
      }
      for (auto& [callee, targets] : by_callee) {
        p.calls.push_back({callee, base + intern(closure(targets))});
      }
      out.push_back(std::move(p));
      if (base + sets.size() > static_cast<size_t>(kMaxStates)) {
        return InvalidArgument("grammar: rule " + EscapePathForDisplay(def.rule.name) +
                               " is too large to compile");
      }
    }
    for (Pending& p : out) {
      State s;
      s.accepting = p.accepting;
      s.bytes_begin = static_cast<uint32_t>(g->byte_edges.size());
      g->byte_edges.insert(g->byte_edges.end(), p.bytes.begin(), p.bytes.end());
      s.bytes_end = static_cast<uint32_t>(g->byte_edges.size());
      s.calls_begin = static_cast<uint32_t>(g->call_edges.size());
      g->call_edges.insert(g->call_edges.end(), p.calls.begin(), p.calls.end());
      s.calls_end = static_cast<uint32_t>(g->call_edges.size());
      g->states.push_back(s);
    }
  }
  if (root < 0 || root >= static_cast<int32_t>(g->rules.size())) {
    return InvalidArgument("grammar: no root rule");
  }
  const std::vector<bool> finishes = PruneUnproductive(g.get());
  for (const Requirement& r : finite_) {
    if (!finishes[static_cast<size_t>(r.rule)]) {
      return InvalidArgument(EscapePathForDisplay(r.where) + ": " + r.what);
    }
  }
  if (!finishes[static_cast<size_t>(root)]) {
    return InvalidArgument("grammar: rule " + EscapePathForDisplay(g->rules[root].name) +
                           " matches no finite text");
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

// ---- Reference acceptance ----------------------------------------------------------------

namespace {

// A configuration: the stack of frames, innermost last; each frame (rule, state).
using Stack = std::vector<std::pair<int32_t, uint32_t>>;

void Expand(const Grammar& g, Stack stack, std::set<Stack>* heads, bool* complete, int depth) {
  if (depth > 4096) return;
  auto [rule, state] = stack.back();
  const Rule& r = g.rules[rule];
  if (r.kind == Rule::kString) {
    if (StringLexer::Done(state)) {
      stack.pop_back();
      if (stack.empty()) {
        *complete = true;
      } else {
        Expand(g, std::move(stack), heads, complete, depth + 1);
      }
    } else {
      heads->insert(stack);
    }
    return;
  }
  const State& s = g.states[state];
  if (s.bytes_end > s.bytes_begin) heads->insert(stack);
  for (uint32_t c = s.calls_begin; c < s.calls_end; ++c) {
    const CallEdge& e = g.call_edges[c];
    Stack next = stack;
    next.back().second = static_cast<uint32_t>(e.to);
    const Rule& callee = g.rules[e.rule];
    next.emplace_back(e.rule, callee.kind == Rule::kString ? StringLexer::kStart
                                                           : static_cast<uint32_t>(callee.start));
    Expand(g, std::move(next), heads, complete, depth + 1);
  }
  if (s.accepting) {
    stack.pop_back();
    if (stack.empty()) {
      *complete = true;
    } else {
      Expand(g, std::move(stack), heads, complete, depth + 1);
    }
  }
}

}  // namespace

bool Grammar::Accepts(std::string_view text) const {
  std::set<Stack> heads;
  bool complete = false;
  const Rule& r = rules[root];
  Expand(*this,
         {{root, r.kind == Rule::kString ? StringLexer::kStart : static_cast<uint32_t>(r.start)}},
         &heads, &complete, 0);
  for (char c : text) {
    const uint8_t b = static_cast<uint8_t>(c);
    std::set<Stack> next;
    bool next_complete = false;
    for (const Stack& st : heads) {
      auto [rule, state] = st.back();
      const Rule& rr = rules[rule];
      if (rr.kind == Rule::kString) {
        uint32_t to;
        if (StringLexer::Step(state, b, rr.min_chars, rr.max_chars, &to)) {
          Stack n = st;
          n.back().second = to;
          Expand(*this, std::move(n), &next, &next_complete, 0);
        }
        continue;
      }
      const State& s = states[state];
      for (uint32_t i = s.bytes_begin; i < s.bytes_end; ++i) {
        if (byte_edges[i].lo <= b && b <= byte_edges[i].hi) {
          Stack n = st;
          n.back().second = static_cast<uint32_t>(byte_edges[i].to);
          Expand(*this, std::move(n), &next, &next_complete, 0);
        }
      }
    }
    heads.swap(next);
    complete = next_complete;
    if (heads.empty() && !complete) return false;
  }
  return complete;
}

std::string Grammar::Describe() const {
  std::string out;
  auto byte_text = [](uint8_t b) {
    if (b >= 0x21 && b < 0x7f && b != '\\') return std::string(1, static_cast<char>(b));
    char buf[8];
    snprintf(buf, sizeof buf, "\\x%02X", b);
    return std::string(buf);
  };
  for (size_t r = 0; r < rules.size(); ++r) {
    const Rule& rule = rules[r];
    out += (static_cast<int32_t>(r) == root ? "root " : "") + std::string("rule ") +
           std::to_string(r) + " " + rule.name;
    if (rule.kind == Rule::kString) {
      out += " (JSON string)\n";
      continue;
    }
    out += "\n";
    // The rule's states are contiguous from `start` up to the next automaton's start.
    int32_t end = static_cast<int32_t>(states.size());
    for (const Rule& other : rules) {
      if (other.kind == Rule::kAutomaton && other.start > rule.start)
        end = std::min(end, other.start);
    }
    for (int32_t s = rule.start; s < end; ++s) {
      const State& st = states[s];
      out += "  s" + std::to_string(s) + (st.accepting ? " (accept)" : "") + ":";
      for (uint32_t i = st.bytes_begin; i < st.bytes_end; ++i) {
        const ByteEdge& e = byte_edges[i];
        out.append(" [").append(byte_text(e.lo));
        if (e.hi != e.lo) out.append("-").append(byte_text(e.hi));
        out.append("]->s").append(std::to_string(e.to));
      }
      for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
        out += " " + rules[call_edges[i].rule].name + "->s" + std::to_string(call_edges[i].to);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace trace::recorder::grammar
