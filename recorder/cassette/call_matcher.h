// Which recorded model call answers an incoming request: the first not yet used among the
// recorded calls with the same request identity (request_identity.h). Taking recorded
// order only among equal requests means concurrent calls that arrive in another order than
// they were recorded still each get their own answer; a request equal to none left is a
// divergence, reported against the first recorded call not yet used (what the recording
// expected next), or as exhaustion when every recorded call was used.
//
// Ownership: borrows the Cassette, which must outlive the matcher. Thread safety: Match
// and the accessors may be called from any number of threads. Errors: none; a mismatch is
// a result, not an error.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "recorder/cassette/cassette.h"

namespace trace::recorder {

struct MatchResult {
  enum Kind {
    kMatched,    // `recorded` answers it
    kDiverged,   // no unused recorded call has this request; `expected` was next
    kExhausted,  // every recorded call has been used
  };
  Kind kind = kMatched;
  const RecordedCall* recorded = nullptr;  // kMatched
  const RecordedCall* expected = nullptr;  // kDiverged: the first unused recorded call
};

class CallMatcher {
 public:
  explicit CallMatcher(const Cassette& cassette);

  MatchResult Match(const RequestIdentity& request);
  // The expected call for a request that will not be matched (a fork's live calls): the
  // first unused one, which is then marked used so the next comparison moves on. Null when
  // all are used.
  const RecordedCall* Skip();

  size_t used() const;
  size_t total() const { return cassette_.calls().size(); }
  // The recorded calls never used, in recorded order.
  std::vector<const RecordedCall*> Unused() const;

 private:
  const RecordedCall* FirstUnusedLocked() const;

  const Cassette& cassette_;
  mutable std::mutex mu_;                             // guards: by_key_, used_, used_count_
  std::map<std::string, std::deque<size_t>> by_key_;  // identity key -> unused indices
  std::vector<bool> used_;
  size_t used_count_ = 0;
};

}  // namespace trace::recorder
