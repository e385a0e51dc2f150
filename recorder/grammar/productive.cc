#include "recorder/grammar/productive.h"

#include <cstdint>
#include <utility>

namespace trace::recorder::grammar {

std::vector<bool> PruneUnproductive(Grammar* grammar) {
  Grammar& g = *grammar;
  const size_t num_states = g.states.size(), num_rules = g.rules.size();
  std::vector<bool> rule_ok(num_rules, false), state_ok(num_states, false);

  // Reverse edges: who reaches a state by a byte (call = -1) or returns to it from a call,
  // and who calls a rule.
  struct Pred {
    int32_t state;
    int32_t call;  // index into g.call_edges, or -1 for a byte edge
  };
  std::vector<std::vector<Pred>> preds(num_states);
  std::vector<std::vector<Pred>> callers(num_rules);
  std::vector<int32_t> rule_of_start(num_states, -1);
  for (size_t r = 0; r < num_rules; ++r) {
    const Rule& rule = g.rules[r];
    if (rule.kind == Rule::kAutomaton && rule.start >= 0) {
      rule_of_start[static_cast<size_t>(rule.start)] = static_cast<int32_t>(r);
    }
  }
  for (size_t s = 0; s < num_states; ++s) {
    const State& st = g.states[s];
    for (uint32_t i = st.bytes_begin; i < st.bytes_end; ++i) {
      preds[static_cast<size_t>(g.byte_edges[i].to)].push_back({static_cast<int32_t>(s), -1});
    }
    for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
      const CallEdge& e = g.call_edges[i];
      preds[static_cast<size_t>(e.to)].push_back(
          {static_cast<int32_t>(s), static_cast<int32_t>(i)});
      callers[static_cast<size_t>(e.rule)].push_back(
          {static_cast<int32_t>(s), static_cast<int32_t>(i)});
    }
  }

  std::vector<int32_t> work;
  auto mark_state = [&](int32_t s) {
    if (!state_ok[static_cast<size_t>(s)]) {
      state_ok[static_cast<size_t>(s)] = true;
      work.push_back(s);
    }
  };
  auto mark_rule = [&](size_t r) {
    if (rule_ok[r]) return;
    rule_ok[r] = true;
    // A call of r now finishes: its caller can go on wherever the call returns to.
    for (const Pred& c : callers[r]) {
      if (state_ok[static_cast<size_t>(g.call_edges[static_cast<size_t>(c.call)].to)]) {
        mark_state(c.state);
      }
    }
  };
  for (size_t r = 0; r < num_rules; ++r) {
    const Rule& rule = g.rules[r];
    // A string rule finishes unless its bounds exclude every length.
    if (rule.kind == Rule::kString && (rule.max_chars < 0 || rule.min_chars <= rule.max_chars)) {
      mark_rule(r);
    }
  }
  for (size_t s = 0; s < num_states; ++s) {
    if (g.states[s].accepting) mark_state(static_cast<int32_t>(s));
  }
  while (!work.empty()) {
    const int32_t t = work.back();
    work.pop_back();
    const size_t ti = static_cast<size_t>(t);
    if (rule_of_start[ti] >= 0) mark_rule(static_cast<size_t>(rule_of_start[ti]));
    for (const Pred& p : preds[ti]) {
      if (p.call < 0 ||
          rule_ok[static_cast<size_t>(g.call_edges[static_cast<size_t>(p.call)].rule)]) {
        mark_state(p.state);
      }
    }
  }

  // Rebuild the edge lists without what cannot finish (states keep their order).
  std::vector<ByteEdge> bytes;
  std::vector<CallEdge> calls;
  bytes.reserve(g.byte_edges.size());
  calls.reserve(g.call_edges.size());
  for (State& st : g.states) {
    const uint32_t b0 = static_cast<uint32_t>(bytes.size());
    for (uint32_t i = st.bytes_begin; i < st.bytes_end; ++i) {
      if (state_ok[static_cast<size_t>(g.byte_edges[i].to)]) bytes.push_back(g.byte_edges[i]);
    }
    const uint32_t c0 = static_cast<uint32_t>(calls.size());
    for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
      const CallEdge& e = g.call_edges[i];
      if (rule_ok[static_cast<size_t>(e.rule)] && state_ok[static_cast<size_t>(e.to)]) {
        calls.push_back(e);
      }
    }
    st.bytes_begin = b0;
    st.bytes_end = static_cast<uint32_t>(bytes.size());
    st.calls_begin = c0;
    st.calls_end = static_cast<uint32_t>(calls.size());
  }
  g.byte_edges = std::move(bytes);
  g.call_edges = std::move(calls);
  return rule_ok;
}

}  // namespace trace::recorder::grammar
