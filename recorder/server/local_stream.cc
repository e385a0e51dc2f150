// Streaming (`stream: true`) for the local engine: chat.completion.chunk / text_completion
// server-sent events as the scheduler produces text, then the tool calls, the final chunk
// with finish_reason and the trace extension, the usage chunk when asked, and [DONE].
#include <nlohmann/json.hpp>

#include "recorder/server/local_engine.h"

namespace trace::recorder {

using json = nlohmann::json;

bool LocalEngineApi::StreamResponse(Call* call, httplib::DataSink& sink) {
  CompletionResult header;
  header.id = call->request_id;
  header.created = call->created;
  header.model = backend_.model_name;
  auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
  bool chat = call->req.chat;
  if (chat &&
      !write(SseData(ChatChunk(header, {{"role", "assistant"}, {"content", ""}}, nullptr)))) {
    call->gen->Cancel();
    return false;
  }
  std::string streamed;
  for (;;) {
    std::deque<std::string> deltas;
    bool finished;
    {
      std::unique_lock<std::mutex> lock(call->stream->mu);
      call->stream->cv.wait(
          lock, [&] { return call->stream->finished || !call->stream->deltas.empty(); });
      deltas.swap(call->stream->deltas);
      finished = call->stream->finished;
    }
    for (const std::string& d : deltas) {
      streamed += d;
      json chunk =
          chat ? ChatChunk(header, {{"content", d}}, nullptr) : TextChunk(header, d, nullptr);
      if (!write(SseData(chunk))) {
        call->gen->Cancel();
        return false;
      }
    }
    if (finished) break;
  }
  const GenerationResult& g = call->gen->Wait();
  CompletionResult r;
  auto [status, body] = Finalize(call, g, &r);
  if (status != 200) {
    write("data: " + body + "\n\n");
    write(std::string(kSseDone));
    sink.done();
    return true;
  }
  // What the non-streamed response says, minus what was already sent.
  std::string rest =
      r.text.compare(0, streamed.size(), streamed) == 0 ? r.text.substr(streamed.size()) : r.text;
  if (!rest.empty()) {
    json chunk =
        chat ? ChatChunk(header, {{"content", rest}}, nullptr) : TextChunk(header, rest, nullptr);
    write(SseData(chunk));
  }
  if (!r.tool_calls.empty()) {
    write(SseData(ChatChunk(header, {{"tool_calls", ToolCallsJson(r.tool_calls, true)}}, nullptr)));
  }
  json last = chat ? ChatChunk(header, json::object(), r.finish_reason)
                   : TextChunk(header, "", r.finish_reason);
  last["trace"] = TraceExtension(r);
  write(SseData(last));
  if (call->req.include_usage_in_stream) {
    json usage = chat ? ChatChunk(header, json::object(), nullptr) : TextChunk(header, "", nullptr);
    usage["choices"] = json::array();
    usage["usage"] = {{"prompt_tokens", r.prompt_tokens},
                      {"completion_tokens", r.completion_tokens},
                      {"total_tokens", r.prompt_tokens + r.completion_tokens}};
    write(SseData(usage));
  }
  write(std::string(kSseDone));
  sink.done();
  return true;
}

}  // namespace trace::recorder
