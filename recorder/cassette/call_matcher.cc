#include "recorder/cassette/call_matcher.h"

#include <algorithm>

namespace trace::recorder {

CallMatcher::CallMatcher(const Cassette& cassette)
    : cassette_(cassette), used_(cassette.calls().size(), false) {
  for (size_t i = 0; i < cassette.calls().size(); ++i) {
    by_key_[cassette.calls()[i].identity.key].push_back(i);
  }
}

const RecordedCall* CallMatcher::FirstUnusedLocked() const {
  auto it = std::find(used_.begin(), used_.end(), false);
  if (it == used_.end()) return nullptr;
  return &cassette_.calls()[static_cast<size_t>(it - used_.begin())];
}

MatchResult CallMatcher::Match(const RequestIdentity& request) {
  std::lock_guard<std::mutex> lock(mu_);
  MatchResult r;
  auto it = by_key_.find(request.key);
  if (it != by_key_.end() && !it->second.empty()) {
    const size_t i = it->second.front();
    it->second.pop_front();
    used_[i] = true;
    ++used_count_;
    r.kind = MatchResult::kMatched;
    r.recorded = &cassette_.calls()[i];
    return r;
  }
  r.expected = FirstUnusedLocked();
  r.kind = r.expected == nullptr ? MatchResult::kExhausted : MatchResult::kDiverged;
  return r;
}

const RecordedCall* CallMatcher::Skip() {
  std::lock_guard<std::mutex> lock(mu_);
  const RecordedCall* first = FirstUnusedLocked();
  if (first == nullptr) return nullptr;
  const size_t i = static_cast<size_t>(first - cassette_.calls().data());
  used_[i] = true;
  ++used_count_;
  auto& queue = by_key_[first->identity.key];
  queue.erase(std::find(queue.begin(), queue.end(), i));
  return first;
}

size_t CallMatcher::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_count_;
}

std::vector<const RecordedCall*> CallMatcher::Unused() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const RecordedCall*> out;
  for (size_t i = 0; i < used_.size(); ++i) {
    if (!used_[i]) out.push_back(&cassette_.calls()[i]);
  }
  return out;
}

}  // namespace trace::recorder
