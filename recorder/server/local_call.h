// One model call served by the local engine, from arrival to recording.
//
// A Call is the scheduler's GenerationObserver for its generation and is shared
// (std::shared_ptr) between the HTTP handler, the response's content provider and the
// scheduler, so none of them can outlive the state the others use: a client that stops
// reading, a handler that returns, a stream torn down before its first byte all leave the
// Call alive until the last of them lets go. Whoever comes last does not matter: the call
// is finalized (response built, LlmCall recorded) exactly once, by the first handler-side
// path that gets there (TryClaimFinalize).
//
// Thread safety: the request fields are written before Submit and only read after; the
// decoding state is written by OnToken (scheduler thread) and read by the handler only
// after the generation finished; `stream` is guarded by its mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "recorder/api/model_call.h"
#include "recorder/scheduler.h"
#include "recorder/server/http_util.h"
#include "recorder/server/response_store.h"

namespace trace::recorder {

// Text a streamed call has made final, waiting for the HTTP writer.
struct StreamQueue {
  struct Piece {
    std::string text;
    std::vector<TokenLogprob> logprobs;  // of the tokens this text completes (when asked)
  };
  std::mutex mu;               // guards: pieces, finished
  std::condition_variable cv;  // a piece added or finished set
  std::deque<Piece> pieces;
  bool finished = false;
};

class Call : public GenerationObserver {
 public:
  // `tokenizer` must outlive the scheduler that runs this call (it does: both belong to
  // the same LocalBackend, whose scheduler is destroyed first).
  explicit Call(const engine::Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  // Request side, set before Submit.
  const WireFormat* format = nullptr;
  CompletionRequest req;
  std::string body;  // as received
  std::string endpoint;
  std::string rendered_prompt;
  std::vector<int32_t> prompt_ids;
  uint64_t seed = 0;
  int64_t call_index = 0;
  int64_t run_position = -1;  // `trace rerun`: the call's 0-based place in the run (seeding)
  std::string constraint_json;
  std::string request_id;
  std::string message_item_id;  // Responses: the output message item's id
  int64_t created = 0;
  int64_t start_ns = 0;
  SteadyClock::time_point start;
  bool tools_active = false;  // tool calls may appear: stream content only at the end
  size_t max_stop_len = 0;
  std::shared_ptr<StreamQueue> stream;  // set for streamed calls
  std::shared_ptr<Generation> gen;
  // Responses conversation state: what Resolve found, stored with the answer when req.store.
  std::optional<ResponseStore::Resolved> conversation;
  // A streamed call's events as written to the client, in order (keep-alive probes left
  // out): recorded as LlmCall.response_stream. Written by the response's writer only.
  std::string sent_stream;

  // Scheduler thread: decode the new token, check stop sequences, queue streamed text.
  bool OnToken(const TokenStep& step) override;
  void OnFinish(const GenerationResult& result) override;

  // After the generation finished: the full text (decoder flushed unless a stop sequence
  // cut it), and the logprobs of every sampled token.
  const std::string& FinalText();
  std::vector<TokenLogprob> LogprobsOf(const std::vector<TokenStep>& steps) const;
  // The stop sequence that ended the text; empty when none did. After the generation.
  const std::string& matched_stop() const { return matched_stop_; }
  // Bytes of FinalText() already streamed, and how many tokens' logprobs went with them.
  size_t streamed_bytes() const { return emitted_; }
  size_t streamed_tokens() const { return emitted_tokens_; }

  // True for the one caller that gets to finalize the call.
  bool TryClaimFinalize() { return !finalize_claimed_.exchange(true); }

 private:
  TokenLogprob MakeLogprob(const TokenStep& step) const;

  const engine::Tokenizer* tokenizer_;
  std::unique_ptr<engine::IncrementalDecoder> decoder_;
  std::string text_;
  bool stop_hit_ = false;
  std::string matched_stop_;
  bool flushed_ = false;
  size_t emitted_ = 0;         // bytes of text_ already queued for streaming
  size_t emitted_tokens_ = 0;  // tokens whose logprobs were queued
  size_t tokens_ = 0;
  std::vector<size_t> token_ends_;  // per token: text_.size() once it was decoded
  std::vector<TokenStep> pending_;  // streamed logprobs not yet queued (when asked)
  std::atomic<bool> finalize_claimed_{false};
};

}  // namespace trace::recorder
