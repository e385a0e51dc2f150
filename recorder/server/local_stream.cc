// Streaming (`stream: true`) for the local engine: the wire format's events as the
// scheduler makes text final, then the rest (tool calls, finish reason, trace extension,
// usage when asked, terminator). A client that stops reading is noticed by a failed write,
// or within kProbeInterval of silence by an SSE comment that cannot be written; its
// generation is cancelled at the next engine step and the call recorded with the tokens
// sampled so far and finish_reason "cancelled". ReleaseStream covers a stream torn down
// before StreamResponse ran or finished. The end of a stream (finish reason, usage,
// terminator) goes out only once the call is committed; if the store did not take it, the
// stream ends with a 503 error event instead.
#include <chrono>

#include "recorder/server/local_engine.h"

namespace trace::recorder {
namespace {

// How long a stream may stay silent before a comment line checks the client is there.
constexpr std::chrono::milliseconds kProbeInterval{500};
// An SSE comment (RFC 8895 ignores lines starting with ':'): every SDK skips it.
constexpr std::string_view kProbe = ": keep-alive\n\n";

}  // namespace

bool LocalEngineApi::StreamResponse(const std::shared_ptr<Call>& call, httplib::DataSink& sink) {
  CompletionResult header;
  header.id = call->request_id;
  header.message_item_id = call->message_item_id;
  header.created = call->created;
  header.model = call->req.model;
  header.system_fingerprint = std::string("trace-") + numerics_;
  header.prompt_tokens = static_cast<int64_t>(call->prompt_ids.size());
  std::unique_ptr<StreamEncoder> encoder = call->format->NewStream(call->req, header);
  // Every event written is kept for the recording (LlmCall.response_stream).
  auto write = [&](const std::string& s) {
    if (s.empty()) return true;
    if (!sink.write(s.data(), s.size())) return false;
    call->sent_stream += s;
    return true;
  };
  auto probe = [&] { return sink.write(kProbe.data(), kProbe.size()); };
  auto abandon = [&] {
    call->gen->Cancel();
    return false;  // ReleaseStream records the call once the generation stopped
  };
  if (!write(encoder->Begin())) return abandon();
  StreamQueue& q = *call->stream;
  for (;;) {
    std::deque<StreamQueue::Piece> pieces;
    bool finished;
    {
      std::unique_lock<std::mutex> lock(q.mu);
      bool ready =
          q.cv.wait_for(lock, kProbeInterval, [&] { return q.finished || !q.pieces.empty(); });
      if (!ready) {
        lock.unlock();
        if (!probe()) return abandon();
        continue;
      }
      pieces.swap(q.pieces);
      finished = q.finished;
    }
    for (const StreamQueue::Piece& p : pieces) {
      if (!write(encoder->Text(p.text, p.logprobs))) return abandon();
    }
    if (finished) break;
  }
  if (!call->TryClaimFinalize()) return false;
  const GenerationResult& g = call->gen->Wait();
  Answer answer = Conclude(call.get(), g);
  std::string tail;
  if (answer.error) {
    tail = encoder->Error(*answer.error);
  } else {
    // What the non-streamed response says, minus what was already sent: the rest of the
    // text (all of it while tool calls were possible) and the logprobs of the tokens not
    // yet sent.
    const CompletionResult& r = answer.result;
    const size_t sent = call->streamed_bytes();
    std::string rest = call->tools_active      ? r.text
                       : r.text.size() >= sent ? r.text.substr(sent)
                                               : std::string();
    std::vector<TokenLogprob> rest_logprobs;
    if (call->req.logprobs) {
      rest_logprobs.assign(r.logprobs.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                    call->streamed_tokens(), r.logprobs.size())),
                           r.logprobs.end());
    }
    tail = encoder->End(r, rest, rest_logprobs);
  }
  // Recorded with the whole stream before its end goes out, and the end waits for the
  // call's commit: a client never sees the end of an answer that is not stored (the text
  // deltas above went out as generated). Not stored: the stream ends with the 503 instead.
  call->sent_stream += tail;
  const bool failed = answer.error.has_value();
  Commit(call.get(), g, &answer);
  if (answer.error && !failed) tail = encoder->Error(*answer.error);
  if (!tail.empty()) sink.write(tail.data(), tail.size());  // already in sent_stream
  sink.done();
  return true;
}

void LocalEngineApi::ReleaseStream(const std::shared_ptr<Call>& call) {
  if (!call->TryClaimFinalize()) return;
  call->gen->Cancel();
  const GenerationResult& g = call->gen->Wait();
  Answer answer = Conclude(call.get(), g);
  Commit(call.get(), g, &answer);
}

}  // namespace trace::recorder
