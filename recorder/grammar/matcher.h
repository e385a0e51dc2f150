// The grammar matcher: where a constrained generation is in its grammar, which tokens may
// come next (a mask over the vocabulary), and consuming the token that was sampled.
//
// The position is a set of stacks of frames (rule, state), the usual way to run a
// recursive transition network without backtracking; stacks share their tails. A mask is
// computed per step from the stacks' tops: a top inside a JSON string takes the
// TokenIndex's precomputed "stays inside with at most r characters" bitset and checks
// only the tokens that close the string against what follows it; every other top walks
// the vocabulary trie, dropping a subtree as soon as its prefix is rejected. Masks are a
// function of the grammar, the vocabulary and the tokens consumed so far, nothing else:
// a replay that rebuilds the matcher from the recorded spec sees the same masks.
//
// Ownership: shares the Grammar and the TokenIndex (immutable). Thread safety: a Matcher
// is used by one thread at a time (masks reuse scratch space). Errors: Advance with a
// token the grammar does not allow is InvalidArgument naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "recorder/grammar/grammar.h"
#include "recorder/grammar/token_index.h"

namespace trace::recorder::grammar {

class Matcher {
 public:
  // `end_token` (>= 0) may follow once the grammar is complete, and then ends it.
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenIndex> index,
          int32_t end_token);

  // mask[id] = 1 for every token allowed next (resized to the vocabulary).
  void FillMask(std::vector<uint8_t>* mask);
  // The same as a bitset (TokenIndex::bitset_words() words).
  void FillBitset(std::vector<uint64_t>* bits);
  Status Advance(int32_t token);
  // Consumes raw bytes (tests, and prefixes that are not tokens); false if rejected, in
  // which case the matcher is unchanged.
  bool AdvanceBytes(std::string_view bytes);
  // Whether `token` may come next (what FillMask computes for one token, the slow way).
  bool WouldAccept(int32_t token);
  // The grammar has been matched in full (more may still be allowed).
  bool CanEnd() const { return complete_; }
  // The end token was consumed: nothing more is allowed.
  bool Done() const { return done_; }

 private:
  struct Node {
    int32_t rule;
    uint32_t state;
    int32_t parent;  // >= 0: persistent node; <= -2: scratch node -(i + 2); -1: bottom
  };
  struct Config {
    std::vector<int32_t> heads;  // node refs whose frames consume bytes next
    bool complete = false;       // the root rule has accepted
    void Clear() {
      heads.clear();
      complete = false;
    }
  };
  static constexpr int32_t kBottom = -1;

  const Node& Get(int32_t ref) const {
    return ref >= 0 ? nodes_[static_cast<size_t>(ref)] : scratch_[static_cast<size_t>(-ref - 2)];
  }
  int32_t NewScratch(int32_t rule, uint32_t state, int32_t parent);
  int32_t Intern(int32_t ref);
  uint32_t StartState(int32_t rule) const;
  void Closure(int32_t ref, Config* out, int depth);
  void Pop(int32_t ref, Config* out, int depth);
  void Step(const Config& in, uint8_t byte, Config* out);
  bool StepBytes(const Config& in, std::string_view bytes, Config* out);
  void Walk(int32_t trie_node, size_t depth, std::vector<uint64_t>* bits);
  void Commit(const Config& c);
  bool IsStringIdle(int32_t ref) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenIndex> index_;
  int32_t end_token_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, std::vector<int32_t>> interned_;  // hash -> candidates
  std::vector<Node> scratch_;
  std::vector<int32_t> heads_;
  bool complete_ = false;
  bool done_ = false;
  // Scratch for masks: one configuration per trie depth, and the closure's visited list.
  std::vector<Config> levels_;
  std::vector<Node> visited_;
  std::vector<uint64_t> bits_;
};

}  // namespace trace::recorder::grammar
