// Streamed calls in proxy mode: one thread reads the upstream's reply while the agent's
// response relays its bytes as they arrive. The agent's response waits for the upstream's
// status first, so an upstream error (a 400, a 429) reaches the agent as that status and
// body, not inside a 200 event stream. An agent that stops reading is noticed at the next
// write: the upstream request is aborted and the call recorded with what was sent. The last
// event of a stream (the terminator, "data: [DONE]", message_stop or response.completed
// with the whole response) waits for the call's commit: the agent never sees the end of an
// answer that is not stored, and gets an error event in the API's shape instead.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>

#include "recorder/api/anthropic_messages.h"
#include "recorder/server/upstream_proxy.h"

namespace trace::recorder {
namespace {

// Where the last complete event of `s[0, end)` ends (just after its blank line, "\n\n" or
// "\n\r\n"), or 0 when there is none.
size_t EventBoundaryBefore(const std::string& s, size_t end) {
  for (size_t i = end; i >= 2; --i) {
    if (s[i - 1] != '\n') continue;
    if (s[i - 2] == '\n' || (i >= 3 && s[i - 2] == '\r' && s[i - 3] == '\n')) return i;
  }
  return 0;
}

// How much of `held` may go out before the commit: everything before its last complete
// event (that event and a partial one after it wait).
size_t Releasable(const std::string& held) {
  const size_t last_end = EventBoundaryBefore(held, held.size());
  return last_end < 2 ? 0 : EventBoundaryBefore(held, last_end - 2);
}

// An error event in `format`'s stream framing (the request as the agent sent it gives the
// encoder; one it cannot parse gets the plain OpenAI framing).
std::string StreamErrorEvent(const WireFormat& format, const std::string& request_body,
                             const ApiError& e) {
  auto parsed = format.Parse(request_body);
  std::string event = "data: " + format.ErrorBody(e) + "\n\n";
  if (auto* req = std::get_if<CompletionRequest>(&parsed)) {
    event = format.NewStream(*req, CompletionResult())->Error(e);
  }
  // The error takes the place of the upstream's end (its terminator was held back), so no
  // terminator follows it: the OpenAI encoders close an error with "data: [DONE]".
  constexpr std::string_view kDone = "data: [DONE]\n\n";
  if (event.size() >= kDone.size() &&
      event.compare(event.size() - kDone.size(), kDone.size(), kDone.data(), kDone.size()) == 0) {
    event.resize(event.size() - kDone.size());
  }
  return event;
}

// The upstream side of one streamed call, shared by the reading thread and the response.
struct UpstreamStream {
  // guards: answered, status, content_type, request_id, chunks, done, error, cancelled,
  // client (reader and recorded are not shared)
  std::mutex mu;
  std::condition_variable cv;  // answered, a chunk received, or done
  bool answered = false;       // status and headers known
  int status = 0;
  std::string content_type;
  std::string request_id;
  std::deque<std::string> chunks;  // received, not yet relayed
  bool done = false;
  httplib::Error error = httplib::Error::Success;
  bool cancelled = false;
  httplib::Client* client = nullptr;  // while its request runs
  std::thread reader;
  bool recorded = false;  // the response's thread only

  // The agent went away: abort the upstream request.
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu);
    cancelled = true;
    if (client != nullptr) client->stop();
  }
  void Join() {
    if (reader.joinable()) reader.join();
  }
};

}  // namespace

void UpstreamProxy::RelayStream(const WireFormat& format, const httplib::Request& req,
                                httplib::Response& res, const std::string& path,
                                const httplib::Headers& headers, std::shared_ptr<Exchange> x) {
  auto up = std::make_shared<UpstreamStream>();
  up->reader = std::thread([this, up, path, headers, body = x->request_body] {
    UpstreamPool::Lease lease = pool_.Acquire();
    {
      std::lock_guard<std::mutex> lock(up->mu);
      up->client = &lease.client();
    }
    httplib::Request r;
    r.method = "POST";
    r.path = path;
    r.headers = headers;
    r.body = body;
    r.set_header("Content-Type", "application/json");
    r.response_handler = [&](const httplib::Response& answer) {
      std::lock_guard<std::mutex> lock(up->mu);
      up->answered = true;
      up->status = answer.status;
      up->content_type = answer.get_header_value("Content-Type");
      up->request_id = answer.has_header("x-request-id") ? answer.get_header_value("x-request-id")
                                                         : answer.get_header_value("request-id");
      up->cv.notify_all();
      return true;
    };
    r.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      std::lock_guard<std::mutex> lock(up->mu);
      if (up->cancelled) return false;
      up->chunks.emplace_back(data, n);
      up->cv.notify_all();
      return true;
    };
    httplib::Result result = lease.client().send(r);
    std::lock_guard<std::mutex> lock(up->mu);
    up->client = nullptr;
    if (!result || up->cancelled) {
      lease.Discard();
      up->error = result ? httplib::Error::Canceled : result.error();
    }
    up->done = true;
    up->cv.notify_all();
  });

  {
    std::unique_lock<std::mutex> lock(up->mu);
    up->cv.wait(lock, [&] { return up->answered || up->done; });
  }
  if (!up->answered || up->status != 200) {
    // No answer, or an error status: the agent gets it as such, whole.
    up->Join();
    if (!up->answered) {
      ApiError e = Unreachable(up->error);
      x->status = e.http_status;
      x->body = format.ErrorBody(e);
      x->error = e.message;
    } else {
      x->status = up->status;
      x->request_id = up->request_id;
      for (const std::string& c : up->chunks) x->body += c;
      if (format.api() == kApiAnthropicMessages) {
        std::string converted = AnthropicErrorFromOpenAi(x->status, x->body);
        if (!converted.empty()) x->body = std::move(converted);
      }
    }
    Answer(format, res, *x, RecordProxiedCall(*x),
           up->content_type.empty() || !up->answered ? "application/json" : up->content_type);
    return;
  }
  x->status = 200;
  x->request_id = up->request_id;
  res.set_header("Cache-Control", "no-cache");
  const std::string type = up->content_type.empty() ? "text/event-stream" : up->content_type;
  res.set_chunked_content_provider(
      type,
      [this, up, x, fmt = &format](size_t, httplib::DataSink& sink) {
        std::string held;  // received, not yet written to the agent
        for (;;) {
          std::deque<std::string> chunks;
          bool done;
          {
            std::unique_lock<std::mutex> lock(up->mu);
            up->cv.wait(lock, [&] { return up->done || !up->chunks.empty(); });
            chunks.swap(up->chunks);
            done = up->done;
          }
          for (const std::string& c : chunks) held += c;
          if (const size_t n = Releasable(held); n > 0) {
            if (!sink.write(held.data(), n)) {
              up->Cancel();  // the releaser records what was sent
              return false;
            }
            x->sent.append(held, 0, n);
            held.erase(0, n);
          }
          if (done) break;
        }
        up->Join();
        if (up->error != httplib::Error::Success) {
          x->error = "upstream " + upstream_ + " stream cut: " + httplib::to_string(up->error);
        }
        // Recorded with its end before the end goes out, and the end waits for the commit.
        x->sent += held;
        Result<uint64_t> last = RecordProxiedCall(*x);
        up->recorded = true;
        if (Status st = frontend_->Commit(last); !st.ok()) {
          held = StreamErrorEvent(*fmt, x->request_body, ErrorFromStatus(st));
        }
        sink.write(held.data(), held.size());
        sink.done();
        return true;
      },
      [this, up, x](bool) {
        up->Cancel();
        up->Join();
        if (up->recorded) return;
        x->cancelled = true;
        x->error = "the agent stopped reading the stream";
        (void)frontend_->Commit(RecordProxiedCall(*x));  // no one left to answer
      });
}

}  // namespace trace::recorder
