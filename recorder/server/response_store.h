// The responses this server produced in the current run, kept for the OpenAI Responses
// API's conversation state: `previous_response_id` (continue a stored response's
// conversation), `item_reference` input items (an earlier output or input item by id, as
// the Vercel AI SDK sends prior turns) and GET / DELETE /v1/responses/{id}.
//
// A stored response is a node: its parent (the response it continued, if any), the
// messages this call added (its input, references resolved, merged into turns) and its
// output as an assistant message, plus the response body as sent. A conversation is the
// chain of nodes, so a long previous_response_id chain is stored once, not once per turn.
// Memory is bounded: past `max_bytes` of stored text the oldest responses are dropped (a
// later reference to one is the same 404 as an unknown id, saying so).
//
// Ownership: owns the nodes; Resolve's result shares its parent node. Thread safety: all
// methods are safe to call concurrently (one mutex). Errors: an unknown response or item
// id is an ApiError 404 naming it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "recorder/api/model_call.h"

namespace trace::recorder {

class ResponseStore {
 public:
  struct Node;
  // What Resolve found for one request, for Put once the call is done.
  struct Resolved {
    std::shared_ptr<const Node> parent;
    std::vector<ChatMessage> added;  // the request's input, resolved and merged
    // Input items the client sent with ids (referable later), before merging.
    std::vector<ChatMessage> input_items;
  };

  explicit ResponseStore(size_t max_bytes = size_t{256} << 20) : max_bytes_(max_bytes) {}

  // Replaces req->messages by the whole conversation: the stored conversation of
  // req->previous_response_id, then the request's items with every item_reference
  // replaced by the item it names, merged into turns (MergeResponsesItems).
  std::variant<Resolved, ApiError> Resolve(CompletionRequest* req) const;

  // Keeps response `r` (its body as sent) for later references.
  void Put(Resolved resolved, const CompletionResult& r, std::string body);

  // The body of a stored response; nullopt when unknown.
  std::optional<std::string> Body(const std::string& response_id) const;
  // Forgets a response (its items stay referable through responses that continue it).
  bool Delete(const std::string& response_id);

  size_t stored_bytes() const;

 private:
  // An item: one input or output item of a stored response, as a message piece.
  struct Item {
    std::string response_id;  // whose eviction drops it
    ChatMessage piece;
  };

  void EvictLocked();

  const size_t max_bytes_;
  mutable std::mutex mu_;  // guards: responses_, items_, order_, bytes_
  std::map<std::string, std::shared_ptr<const Node>> responses_;
  std::map<std::string, Item> items_;
  std::deque<std::string> order_;  // response ids, oldest first
  size_t bytes_ = 0;
};

}  // namespace trace::recorder
