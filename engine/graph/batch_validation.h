// Validation of one Engine::Forward batch, shared by every backend so that the CPU and
// CUDA engines accept and refuse exactly the same batches, with the same messages.
//
// Ownership: reads the caller's items only. Thread safety: pure function. Errors: the
// first problem found, naming the item index and sequence; nothing is changed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>

#include "base/status.h"
#include "engine/engine.h"

namespace trace::engine {

struct BatchShape {
  int64_t total_rows = 0;    // tokens in the batch
  int64_t total_logits = 0;  // logits rows asked for
};

// `length_of(seq)` returns the cached length of a sequence, or -1 when it does not exist.
// Checks: every sequence exists and appears once; it fits the context; every token id is
// in the vocabulary; logits_at indices are ascending and inside the item's tokens.
template <typename LengthOf>
Result<BatchShape> ValidateBatch(std::span<const BatchItem> items, int64_t vocab_size,
                                 int64_t max_context, LengthOf length_of) {
  std::unordered_set<SeqId> seen;
  BatchShape shape;
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& item = items[i];
    const std::string where =
        "forward item " + std::to_string(i) + " (sequence " + std::to_string(item.seq) + ")";
    const int64_t length = length_of(item.seq);
    if (length < 0) return NotFound(where + ": sequence does not exist");
    if (!seen.insert(item.seq).second) {
      return InvalidArgument(where + ": sequence appears twice in one batch");
    }
    const int64_t n = static_cast<int64_t>(item.tokens.size());
    if (length + n > max_context) {
      return InvalidArgument(where + ": " + std::to_string(length) + " + " + std::to_string(n) +
                             " tokens exceed the context of " + std::to_string(max_context));
    }
    for (int64_t t = 0; t < n; ++t) {
      if (item.tokens[t] < 0 || item.tokens[t] >= vocab_size) {
        return InvalidArgument(where + ": token " + std::to_string(t) + " id " +
                               std::to_string(item.tokens[t]) + " is outside the vocabulary of " +
                               std::to_string(vocab_size));
      }
    }
    for (size_t j = 0; j < item.logits_at.size(); ++j) {
      const int32_t at = item.logits_at[j];
      if (at < 0 || at >= n || (j > 0 && at <= item.logits_at[j - 1])) {
        return InvalidArgument(
            where + ": logits_at[" + std::to_string(j) + "] = " + std::to_string(at) +
            " is not an ascending index into its " + std::to_string(n) + " tokens");
      }
    }
    shape.total_rows += n;
    shape.total_logits += static_cast<int64_t>(item.logits_at.size());
  }
  return shape;
}

}  // namespace trace::engine
