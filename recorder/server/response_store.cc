#include "recorder/server/response_store.h"

#include <algorithm>

#include "recorder/api/openai_responses.h"

namespace trace::recorder {

struct ResponseStore::Node {
  std::string id;
  std::shared_ptr<const Node> parent;
  std::vector<ChatMessage> added;
  ChatMessage output;  // role assistant: the response's text and tool calls
  std::string body;
  size_t bytes = 0;
  std::vector<std::string> item_ids;  // the items it made referable
};

namespace {

size_t MessageBytes(const ChatMessage& m) {
  size_t n = m.content.size() + m.tool_call_id.size() + m.item_id.size() + 64;
  for (const ToolCall& c : m.tool_calls) {
    n += c.id.size() + c.name.size() + c.arguments.size() + c.item_id.size();
  }
  return n;
}

ApiError NotFound(const std::string& param, const std::string& code, const std::string& what) {
  ApiError e;
  e.http_status = 404;
  e.param = param;
  e.code = code;
  e.message = what +
              " not found: this server keeps the responses it produced in this run with "
              "store: true (up to its memory limit, oldest dropped first)";
  return e;
}

}  // namespace

std::variant<ResponseStore::Resolved, ApiError> ResponseStore::Resolve(
    CompletionRequest* req) const {
  Resolved res;
  std::vector<ChatMessage> items;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!req->previous_response_id.empty()) {
      auto it = responses_.find(req->previous_response_id);
      if (it == responses_.end()) {
        return NotFound("previous_response_id", "previous_response_not_found",
                        "Previous response with id '" + req->previous_response_id + "'");
      }
      res.parent = it->second;
    }
    items.reserve(req->messages.size());
    for (ChatMessage& m : req->messages) {
      if (!m.item_reference.empty()) {
        auto it = items_.find(m.item_reference);
        if (it == items_.end()) {
          return NotFound("input", "item_not_found",
                          "Item with id '" + m.item_reference + "' (an item_reference in 'input')");
        }
        items.push_back(it->second.piece);
        continue;
      }
      bool has_id =
          !m.item_id.empty() || std::any_of(m.tool_calls.begin(), m.tool_calls.end(),
                                            [](const ToolCall& c) { return !c.item_id.empty(); });
      if (has_id) res.input_items.push_back(m);
      items.push_back(std::move(m));
    }
  }
  res.added = MergeResponsesItems(std::move(items));
  // The whole conversation: the chain of stored responses, oldest first, then this input.
  std::vector<const Node*> chain;
  for (const Node* n = res.parent.get(); n != nullptr; n = n->parent.get()) chain.push_back(n);
  std::vector<ChatMessage> conversation;
  for (auto n = chain.rbegin(); n != chain.rend(); ++n) {
    conversation.insert(conversation.end(), (*n)->added.begin(), (*n)->added.end());
    conversation.push_back((*n)->output);
  }
  conversation.insert(conversation.end(), res.added.begin(), res.added.end());
  // Merged once more across the boundary: a function_call item at the start of the input
  // joins the assistant turn the previous response ended with, as it would in one flat list.
  req->messages = MergeResponsesItems(std::move(conversation));
  return res;
}

void ResponseStore::Put(Resolved resolved, const CompletionResult& r, std::string body) {
  auto node = std::make_shared<Node>();
  node->id = r.id;
  node->parent = std::move(resolved.parent);
  node->added = std::move(resolved.added);
  node->output.role = "assistant";
  node->output.content = r.text;
  node->output.tool_calls = r.tool_calls;
  node->body = std::move(body);
  node->bytes = node->body.size() + MessageBytes(node->output);
  for (const ChatMessage& m : node->added) node->bytes += MessageBytes(m);

  std::vector<std::pair<std::string, ChatMessage>> items;
  if (!r.message_item_id.empty() && (!r.text.empty() || r.tool_calls.empty())) {
    ChatMessage piece;
    piece.role = "assistant";
    piece.content = r.text;
    piece.item_id = r.message_item_id;
    items.emplace_back(r.message_item_id, std::move(piece));
  }
  for (const ToolCall& c : r.tool_calls) {
    if (c.item_id.empty()) continue;
    ChatMessage piece;
    piece.role = "assistant";
    piece.tool_calls.push_back(c);
    items.emplace_back(c.item_id, std::move(piece));
  }
  for (ChatMessage& m : resolved.input_items) {
    std::string id = !m.item_id.empty() ? m.item_id : m.tool_calls.front().item_id;
    node->bytes += MessageBytes(m);
    items.emplace_back(std::move(id), std::move(m));
  }

  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, piece] : items) {
    node->item_ids.push_back(id);
    items_[id] = Item{r.id, std::move(piece)};
  }
  bytes_ += node->bytes;
  order_.push_back(r.id);
  responses_[r.id] = std::move(node);
  EvictLocked();
}

void ResponseStore::EvictLocked() {
  while (bytes_ > max_bytes_ && order_.size() > 1) {
    std::string id = std::move(order_.front());
    order_.pop_front();
    auto it = responses_.find(id);
    if (it == responses_.end()) continue;  // deleted already
    bytes_ -= it->second->bytes;
    for (const std::string& item : it->second->item_ids) {
      auto at = items_.find(item);
      if (at != items_.end() && at->second.response_id == id) items_.erase(at);
    }
    responses_.erase(it);
  }
}

std::optional<std::string> ResponseStore::Body(const std::string& response_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = responses_.find(response_id);
  if (it == responses_.end()) return std::nullopt;
  return it->second->body;
}

bool ResponseStore::Delete(const std::string& response_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = responses_.find(response_id);
  if (it == responses_.end()) return false;
  bytes_ -= it->second->bytes;
  for (const std::string& item : it->second->item_ids) {
    auto at = items_.find(item);
    if (at != items_.end() && at->second.response_id == response_id) items_.erase(at);
  }
  responses_.erase(it);
  order_.erase(std::find(order_.begin(), order_.end(), response_id));
  return true;
}

size_t ResponseStore::stored_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace trace::recorder
