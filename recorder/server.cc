#include "recorder/server.h"

#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/build_info.h"
#include "base/hash.h"
#include "recorder/constrained.h"
#include "recorder/openai_api.h"

namespace trace::recorder {
namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Iso8601(int64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1000000000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[64];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           static_cast<long long>((ns % 1000000000) / 1000));
  return buf;
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(e.Body(), "application/json");
}

ApiError ErrorFromStatus(const Status& st) {
  ApiError e;
  e.message = st.message();
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      e.http_status = 400;
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "server_error";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
  }
  return e;
}

std::string RandomHex(size_t bytes) {
  std::string out;
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    unsigned char c = static_cast<unsigned char>(urandom.get());
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// Streamed text waiting for the HTTP writer.
struct StreamQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> deltas;
  bool finished = false;
};

// One model call from arrival to recording.
struct Call {
  CompletionRequest req;
  std::string body;  // as received
  std::string endpoint;
  std::string rendered_prompt;
  std::vector<int32_t> prompt_ids;
  uint64_t seed = 0;
  int64_t call_index = 0;
  std::string constraint_json;
  std::string request_id;
  int64_t created = 0;
  int64_t start_ns = 0;
  SteadyClock::time_point start;
  bool tools_active = false;  // tool calls may appear: stream content only at the end
  size_t max_stop_len = 0;
  // Scheduler-thread state (read by the handler only after the generation finished).
  std::unique_ptr<engine::IncrementalDecoder> decoder;
  std::string text;
  bool stop_hit = false;
  size_t emitted = 0;  // bytes of `text` already streamed
  std::shared_ptr<StreamQueue> stream;
  std::shared_ptr<Generation> gen;
};

// Debian's compiled cpp-httplib listens with a backlog of 5. A burst of concurrent
// clients (an agent running 16 sessions) then overflows the accept queue while the
// machine is busy, and Linux drops the handshakes' last ACKs: those clients see their
// connection reset ("Read" errors). Calling listen() again on the bound socket raises the
// backlog; the socket is found among our own descriptors by its local port.
void WidenListenBacklog(int port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (fd <= 2 || fd == dirfd(dir)) continue;
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    int bound_port = -1;
    if (addr.ss_family == AF_INET) {
      bound_port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      bound_port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    }
    if (bound_port == port) ::listen(fd, SOMAXCONN);
  }
  closedir(dir);
}

class LocalServer : public Server {
 public:
  LocalServer(LocalBackend backend, const ServerOptions& options, std::string upstream = "")
      : backend_(std::move(backend)), options_(options), upstream_(std::move(upstream)) {
    id_prefix_ = RandomHex(4);
    if (!upstream_.empty()) {
      Routes();
      return;
    }
    classes_ = std::make_unique<TokenClasses>(*backend_.tokenizer);
    const engine::Tokenizer& tok = *backend_.tokenizer;
    if (auto id = tok.TokenId("<|im_end|>")) end_tokens_.push_back(*id);
    if (auto id = tok.eos_token_id()) end_tokens_.push_back(*id);
    for (int32_t id : backend_.model->config().eos_token_ids) end_tokens_.push_back(id);
    std::sort(end_tokens_.begin(), end_tokens_.end());
    end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
    turn_end_token_ =
        tok.TokenId("<|im_end|>").value_or(end_tokens_.empty() ? 0 : end_tokens_.front());
    const auto& eo = backend_.scheduler->engine().options();
    max_context_ =
        eo.max_context > 0 ? eo.max_context : backend_.model->config().max_position_embeddings;
    numerics_ = eo.numerics == kernels::Numerics::kCanonical ? kernels::kNumericsVersion : "fast";
    Routes();
  }

  ~LocalServer() override { Stop(); }

  void SetRunLog(RunLog* log) override { log_ = log; }

  Status Start() override {
    http_.new_task_queue = [n = options_.http_threads] { return new httplib::ThreadPool(n); };
    int port = options_.port == 0
                   ? http_.bind_to_any_port(options_.host)
                   : (http_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
    if (port <= 0) {
      return IOError("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
    }
    port_ = port;
    WidenListenBacklog(port);
    listen_returned_ = false;
    thread_ = std::thread([this] {
      http_.listen_after_bind();
      listen_returned_ = true;
    });
    // httplib's stop() does nothing until the listening thread has marked the server
    // running; a Stop() before that (`trace record -- true`) would then wait forever.
    while (!http_.is_running() && !listen_returned_) std::this_thread::yield();
    return Status::Ok();
  }

  void Stop() override {
    if (thread_.joinable()) {
      http_.stop();
      thread_.join();
    }
  }

  int port() const override { return port_; }
  std::string origin() const override {
    return "http://" + options_.host + ":" + std::to_string(port_);
  }
  const std::string& model_name() const override { return backend_.model_name; }
  const Scheduler* scheduler() const override { return backend_.scheduler.get(); }

  // "http://host:port/v1" -> ("http://host:port", "/v1").
  static std::pair<std::string, std::string> SplitUrl(const std::string& url) {
    size_t scheme = url.find("://");
    size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    if (path == std::string::npos) return {url, ""};
    std::string prefix = url.substr(path);
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    return {url.substr(0, path), prefix};
  }

 private:
  void Routes() {
    http_.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          ApiError e;
          e.http_status = 500;
          e.type = "server_error";
          try {
            if (ep) std::rethrow_exception(ep);
          } catch (const std::exception& ex) {
            e.message = std::string("internal error: ") + ex.what();
          } catch (...) {
            e.message = "internal error";
          }
          SendError(res, e);
        });
    http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      ApiError e;
      e.http_status = res.status;
      if (res.status == 404) {
        e.code = "not_found";
        e.message = "no route " + req.method + " " + req.path;
      } else {
        e.message = "HTTP " + std::to_string(res.status);
      }
      Reject(req, e);
      res.set_content(e.Body(), "application/json");
    });
    http_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    http_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      if (!upstream_.empty()) return Proxy(req, res, "/models");
      json body = {{"object", "list"},
                   {"data", json::array({{{"id", backend_.model_name},
                                          {"object", "model"},
                                          {"created", 0},
                                          {"owned_by", "trace"}}})}};
      res.set_content(body.dump(), "application/json");
    });
    http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      HandleCompletion(req, res, /*chat=*/true);
    });
    http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      HandleCompletion(req, res, /*chat=*/false);
    });
    http_.Post("/trace/v1/events", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      HandleEvents(req, res);
    });
    http_.Get("/trace/v1/clock", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      HandleClock(req, res);
    });
    http_.Post("/trace/v1/flush", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      uint64_t durable = 0;
      if (log_) {
        Status st = log_->writer().Flush();
        if (!st.ok()) return SendError(res, ErrorFromStatus(st));
        durable = log_->writer().durable_seq();
      }
      res.set_content(json{{"durable_seq", durable}, {"recorded", log_ != nullptr}}.dump(),
                      "application/json");
    });
  }

  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty()) return true;
    std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + options_.api_key) return true;
    ApiError e;
    e.http_status = 401;
    e.code = "invalid_api_key";
    e.message = auth.empty() ? "missing API key: send 'Authorization: Bearer $OPENAI_API_KEY'"
                             : "invalid API key in the Authorization header";
    Reject(req, e);
    SendError(res, e);
    return false;
  }

  // A rejected request is recorded as a note, so the run shows it and keeps going.
  void Reject(const httplib::Request& req, const ApiError& e) {
    if (!log_) return;
    proto::Note note;
    note.set_topic("rejected_request");
    note.set_text(req.method + " " + req.path + " -> " + std::to_string(e.http_status) + ": " +
                  e.message);
    note.set_data_json(
        json{{"status", e.http_status}, {"param", e.param}, {"body_bytes", req.body.size()}}
            .dump());
    (void)log_->RecordNote(std::move(note));
  }

  void HandleCompletion(const httplib::Request& http_req, httplib::Response& res, bool chat) {
    if (!Authorized(http_req, res)) return;
    if (Status st = log_ ? log_->Writable() : Status::Ok(); !st.ok()) {
      return SendError(res, ErrorFromStatus(st));
    }
    if (!upstream_.empty())
      return Proxy(http_req, res, chat ? "/chat/completions" : "/completions");
    auto call = std::make_shared<Call>();
    call->start = SteadyClock::now();
    call->start_ns = NowNs();
    call->body = http_req.body;
    call->endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
    auto parsed = ParseCompletionRequest(http_req.body, chat);
    if (auto* err = std::get_if<ApiError>(&parsed)) {
      Reject(http_req, *err);
      return SendError(res, *err);
    }
    call->req = std::move(std::get<CompletionRequest>(parsed));
    CompletionRequest& req = call->req;
    if (req.model != backend_.model_name) {
      ApiError e;
      e.http_status = 404;
      e.code = "model_not_found";
      e.param = "model";
      e.message = "model \"" + req.model + "\" is not served here; this server serves \"" +
                  backend_.model_name + "\"";
      Reject(http_req, e);
      return SendError(res, e);
    }
    if (std::optional<ApiError> err = Prepare(call.get())) {
      Reject(http_req, *err);
      return SendError(res, *err);
    }

    GenerationRequest gen_req;
    gen_req.prompt = call->prompt_ids;
    gen_req.sampling = req.sampling;
    gen_req.seed = call->seed;
    gen_req.end_tokens = end_tokens_;
    gen_req.want_logprobs = req.logprobs;
    gen_req.top_logprobs = req.top_logprobs;
    if (!call->constraint_json.empty()) {
      auto c = Constraint::Create(json::parse(call->constraint_json), *backend_.tokenizer,
                                  *classes_, turn_end_token_);
      if (!c.ok()) {
        ApiError e = BadRequest("tool_choice", c.status().message());
        Reject(http_req, e);
        return SendError(res, e);
      }
      gen_req.constraint = std::move(c).value();
    }
    call->decoder = std::make_unique<engine::IncrementalDecoder>(*backend_.tokenizer, true);
    if (req.stream) call->stream = std::make_shared<StreamQueue>();
    Call* raw = call.get();
    gen_req.on_token = [raw](const TokenStep& step) { return OnToken(raw, step); };
    if (call->stream) {
      gen_req.on_finish = [q = call->stream] {
        {
          std::lock_guard<std::mutex> lock(q->mu);
          q->finished = true;
        }
        q->cv.notify_all();
      };
    }
    call->gen = backend_.scheduler->Submit(std::move(gen_req));

    if (!req.stream) {
      const GenerationResult& result = call->gen->Wait();
      auto [status, body] = Finalize(call.get(), result);
      res.status = status;
      res.set_content(body, "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, call](size_t, httplib::DataSink& sink) { return StreamResponse(call.get(), sink); });
  }

  // Renders, tokenizes, picks the seed and the constraint. An error is the client's.
  std::optional<ApiError> Prepare(Call* call) {
    CompletionRequest& req = call->req;
    if (req.chat) {
      // Everything the template sees keeps the client's key order (RenderOrdered), as
      // Hugging Face's apply_chat_template does with Python dicts: a tool schema's
      // properties print in the order sent, not sorted.
      nlohmann::ordered_json kwargs = nullptr;
      if (auto k = req.raw_ordered.find("chat_template_kwargs");
          k != req.raw_ordered.end() && k->is_object()) {
        kwargs = *k;
      }
      nlohmann::ordered_json ordered_tools = ToolsForTemplateOrdered(req.tools);
      if (req.tool_choice == ToolChoice::kNone) ordered_tools = nullptr;
      json tools = ordered_tools;
      Result<std::string> prompt = backend_.chat_template->RenderOrdered(
          MessagesForTemplateOrdered(req.messages), ordered_tools,
          /*add_generation_prompt=*/true, kwargs);
      if (!prompt.ok()) {
        ApiError e = BadRequest("messages", "chat template: " + prompt.status().message());
        e.http_status = 422;
        return e;
      }
      call->rendered_prompt = std::move(prompt).value();
      call->tools_active = tools.is_array();
      if (req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed) {
        call->constraint_json =
            ToolCallConstraintSpec(
                tools, req.tool_choice == ToolChoice::kNamed ? req.tool_choice_name : std::string())
                .dump();
      }
    } else {
      call->rendered_prompt = req.prompt;
    }
    if (!req.guided_choice.empty()) {
      call->constraint_json = GuidedChoiceSpec(req.guided_choice).dump();
      call->tools_active = false;
    }
    call->prompt_ids = backend_.tokenizer->Encode(call->rendered_prompt);
    if (call->prompt_ids.empty())
      return BadRequest(req.chat ? "messages" : "prompt", "the prompt is empty");
    int64_t n = static_cast<int64_t>(call->prompt_ids.size());
    if (max_context_ > 0 && n >= max_context_) {
      ApiError e =
          BadRequest(req.chat ? "messages" : "prompt", "the prompt has " + std::to_string(n) +
                                                           " tokens; the model's context is " +
                                                           std::to_string(max_context_));
      e.code = "context_length_exceeded";
      return e;
    }
    if (max_context_ > 0 && n + req.sampling.max_tokens > max_context_) {
      req.sampling.max_tokens = static_cast<int32_t>(max_context_ - n);
    }
    for (const std::string& s : req.sampling.stop)
      call->max_stop_len = std::max(call->max_stop_len, s.size());
    call->call_index = next_call_index_++;
    call->seed = req.seed ? *req.seed : DeriveCallSeed(options_.run_seed, call->call_index);
    call->created = call->start_ns / 1000000000;
    call->request_id = std::string(req.chat ? "chatcmpl-" : "cmpl-") + id_prefix_ + "-" +
                       std::to_string(call->call_index);
    if (log_) RecordToolResultsFromMessages(req);
    return std::nullopt;
  }

  // Scheduler thread: decode the new token, check stop sequences, queue streamed text.
  static bool OnToken(Call* call, const TokenStep& step) {
    if (call->stop_hit) return true;
    call->text += call->decoder->Push(step.token);
    for (const std::string& s : call->req.sampling.stop) {
      size_t from = call->text.size() > s.size() + 64 ? call->text.size() - s.size() - 64 : 0;
      size_t pos = call->text.find(s, from);
      if (pos != std::string::npos) {
        call->text.resize(pos);
        call->stop_hit = true;
      }
    }
    if (call->stream && !call->tools_active) {
      size_t hold = call->max_stop_len > 0 ? call->max_stop_len - 1 : 0;
      size_t safe = call->stop_hit ? call->text.size()
                                   : (call->text.size() > hold ? call->text.size() - hold : 0);
      while (safe > call->emitted && safe < call->text.size() &&
             (static_cast<unsigned char>(call->text[safe]) & 0xC0) == 0x80) {
        --safe;
      }
      if (safe > call->emitted) {
        {
          std::lock_guard<std::mutex> lock(call->stream->mu);
          call->stream->deltas.push_back(call->text.substr(call->emitted, safe - call->emitted));
        }
        call->emitted = safe;
        call->stream->cv.notify_all();
      }
    }
    return call->stop_hit;
  }

  CompletionResult BuildResult(Call* call, const GenerationResult& g) {
    CompletionResult r;
    r.id = call->request_id;
    r.created = call->created;
    r.model = backend_.model_name;
    r.system_fingerprint = std::string("trace-") + numerics_;
    if (!call->stop_hit) call->text += call->decoder->Flush();
    r.text = call->text;
    r.finish_reason = g.finish_reason == "cancelled" ? "stop" : g.finish_reason;
    r.prompt_tokens = static_cast<int64_t>(call->prompt_ids.size());
    r.completion_tokens = static_cast<int64_t>(g.steps.size());
    r.cached_prompt_tokens = g.reused_prompt_tokens;
    r.call_index = call->call_index;
    r.seed = call->seed;
    for (const TokenStep& s : g.steps) {
      r.token_ids.push_back(s.token);
      r.logits_digests.push_back(s.logits_digest);
      if (call->req.logprobs) {
        TokenLogprob lp;
        lp.token = engine::SanitizeUtf8(backend_.tokenizer->TokenBytes(s.token));
        lp.logprob = s.model_logprob;
        for (const auto& [id, v] : s.top) {
          lp.top.emplace_back(engine::SanitizeUtf8(backend_.tokenizer->TokenBytes(id)), v);
        }
        r.logprobs.push_back(std::move(lp));
      }
    }
    if (call->tools_active) {
      ExtractedToolCalls ex =
          ExtractToolCalls(r.text, id_prefix_ + std::to_string(call->call_index));
      if (!ex.calls.empty()) {
        r.tool_calls = std::move(ex.calls);
        r.text = std::move(ex.content);
        r.finish_reason = "tool_calls";
      }
    }
    return r;
  }

  // Builds the response, records the call; returns (HTTP status, non-streamed body).
  std::pair<int, std::string> Finalize(Call* call, const GenerationResult& g,
                                       CompletionResult* out = nullptr) {
    CompletionResult r = BuildResult(call, g);
    int status = 200;
    std::string body;
    std::string error;
    if (!g.status.ok()) {
      ApiError e = ErrorFromStatus(g.status);
      status = e.http_status;
      body = e.Body();
      error = g.status.message();
    } else {
      body = call->req.chat ? ChatCompletionBody(r, call->req.logprobs)
                            : CompletionBody(r, call->req.logprobs);
    }
    // Acknowledged means stored: the answer goes out once the call is committed, else 503.
    if (Status st = log_ ? log_->Commit(Record(call, g, r, status, body, error)) : Status::Ok();
        !st.ok()) {
      ApiError e = ErrorFromStatus(st);
      status = e.http_status;
      body = e.Body();
    }
    if (out) *out = std::move(r);
    return {status, body};
  }

  Result<uint64_t> Record(Call* call, const GenerationResult& g, const CompletionResult& r,
                          int status, const std::string& body, const std::string& error) {
    const CompletionRequest& req = call->req;
    proto::LlmCall c;
    c.set_endpoint(call->endpoint);
    c.set_request_json(call->body);
    c.set_rendered_prompt(call->rendered_prompt);
    for (int32_t id : call->prompt_ids) c.add_prompt_token_ids(id);
    proto::SamplingParams* p = c.mutable_params();
    p->set_temperature(req.sampling.temperature);
    p->set_top_p(req.sampling.top_p);
    p->set_top_k(req.sampling.top_k);
    p->set_max_tokens(req.sampling.max_tokens);
    for (const std::string& s : req.sampling.stop) p->add_stop(s);
    if (req.seed) p->set_seed(*req.seed);
    p->set_logprobs(req.logprobs);
    p->set_top_logprobs(req.top_logprobs);
    p->set_n(1);
    c.set_seed_used(call->seed);
    c.set_numerics(numerics_);
    c.set_batch_size(g.max_batch_size);
    c.set_constraint_json(call->constraint_json);
    for (const TokenStep& s : g.steps) {
      c.add_token_ids(s.token);
      c.add_logits_digests(s.logits_digest);
      c.add_logits(s.logit);
      c.add_logprobs(s.logprob);
      c.add_runner_up_ids(s.runner_up);
      c.add_runner_up_logits(s.runner_up_logit);
    }
    // Layer digests (--layer-digests): token-major, num_layers per sampled token; stored
    // only when every token has the same, non-zero count.
    if (!g.steps.empty() && !g.steps[0].layer_digests.empty()) {
      const size_t layers = g.steps[0].layer_digests.size();
      bool uniform = true;
      for (const TokenStep& s : g.steps) uniform = uniform && s.layer_digests.size() == layers;
      if (uniform) {
        c.set_num_layers(static_cast<int32_t>(layers));
        for (const TokenStep& s : g.steps) {
          for (uint64_t d : s.layer_digests) c.add_layer_digests(d);
        }
      }
    }
    c.set_finish_reason(status == 200 ? r.finish_reason : "error");
    c.set_output_text(call->text);
    c.set_response_json(body);
    proto::Timings* t = c.mutable_timings();
    t->set_queue_ms(g.queue_ms);
    t->set_prefill_ms(g.prefill_ms);
    t->set_decode_ms(g.decode_ms);
    t->set_total_ms(
        std::chrono::duration<double, std::milli>(SteadyClock::now() - call->start).count());
    t->set_start_ns(call->start_ns);
    t->set_end_ns(NowNs());
    c.set_model(req.model);
    c.set_request_id(call->request_id);
    c.set_http_status(status);
    c.set_error(error);
    c.set_stream(req.stream);
    c.set_prompt_tokens_reused(static_cast<int32_t>(g.reused_prompt_tokens));
    Result<uint64_t> seq = log_->RecordLlmCall(std::move(c));
    if (!seq.ok()) return seq;
    uint64_t last = *seq;
    for (const ToolCall& tc : r.tool_calls) {
      proto::ToolCall e;
      e.set_call_id(tc.id);
      e.set_name(tc.name);
      e.set_arguments_json(tc.arguments);
      e.set_source("model");
      e.set_llm_call_seq(*seq);
      if (auto t = log_->RecordToolCall(std::move(e)); t.ok()) last = std::max(last, *t);
    }
    return last;
  }

  void RecordToolResultsFromMessages(const CompletionRequest& req) {
    for (const ChatMessage& m : req.messages) {
      if (m.role != "tool") continue;
      proto::ToolResult r;
      r.set_call_id(m.tool_call_id);
      std::string name = m.name;
      for (const ChatMessage& a : req.messages) {
        for (const ToolCall& tc : a.tool_calls) {
          if (tc.id == m.tool_call_id) name = tc.name;
        }
      }
      r.set_name(name);
      r.set_content(m.content);
      (void)log_->RecordToolResult(std::move(r));
    }
  }

  bool StreamResponse(Call* call, httplib::DataSink& sink) {
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
      write(
          SseData(ChatChunk(header, {{"tool_calls", ToolCallsJson(r.tool_calls, true)}}, nullptr)));
    }
    json last = chat ? ChatChunk(header, json::object(), r.finish_reason)
                     : TextChunk(header, "", r.finish_reason);
    last["trace"] = TraceExtension(r);
    write(SseData(last));
    if (call->req.include_usage_in_stream) {
      json usage =
          chat ? ChatChunk(header, json::object(), nullptr) : TextChunk(header, "", nullptr);
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

  // Proxy mode: forward to the upstream as given, streaming included, and record the
  // request and the response (or the reassembled stream) as an LlmCall.
  void Proxy(const httplib::Request& req, httplib::Response& res, const std::string& path) {
    auto [origin, prefix] = SplitUrl(upstream_);
    auto start = SteadyClock::now();
    int64_t start_ns = NowNs();
    json body = json::parse(req.body, nullptr, false);
    bool stream = body.is_object() && body.value("stream", false) == true;
    httplib::Headers headers;
    if (const char* key = getenv("TRACE_UPSTREAM_API_KEY"); key && *key) {
      headers.emplace("Authorization", std::string("Bearer ") + key);
    }
    auto client = std::make_shared<httplib::Client>(origin);
    client->set_read_timeout(600, 0);
    client->set_connection_timeout(10, 0);
    std::string endpoint = "/v1" + path;
    if (req.method == "GET") {
      auto r = client->Get((prefix + path).c_str(), headers);
      if (!r) return SendUpstreamError(res, r.error());
      res.status = r->status;
      res.set_content(r->body, r->get_header_value("Content-Type").empty()
                                   ? "application/json"
                                   : r->get_header_value("Content-Type"));
      return;
    }
    if (log_ && body.is_object()) {
      auto parsed = ParseCompletionRequest(req.body, path == "/chat/completions");
      if (auto* p = std::get_if<CompletionRequest>(&parsed)) RecordToolResultsFromMessages(*p);
    }
    if (!stream) {
      auto r = client->Post((prefix + path).c_str(), headers, req.body, "application/json");
      if (!r) return SendUpstreamError(res, r.error());
      // Acknowledged means stored: answer once the call is committed, else 503.
      Result<uint64_t> seq =
          RecordProxied(endpoint, req.body, r->status, r->body, "", false, start, start_ns);
      if (Status st = log_ ? log_->Commit(seq) : Status::Ok(); !st.ok()) {
        return SendError(res, ErrorFromStatus(st));
      }
      res.status = r->status;
      res.set_content(r->body, "application/json");
      return;
    }
    std::string full_path = prefix + path;
    std::string request_body = req.body;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, client, full_path, request_body, headers, endpoint, start,
                              start_ns](size_t, httplib::DataSink& sink) {
          httplib::Request up;
          up.method = "POST";
          up.path = full_path;
          up.headers = headers;
          up.body = request_body;
          up.set_header("Content-Type", "application/json");
          int status = 0;
          std::string raw;
          up.response_handler = [&](const httplib::Response& r) {
            status = r.status;
            return true;
          };
          // The stream's last bytes (its "data: [DONE]") are held back until the call is
          // committed: the client does not see the end of an answer that is not stored.
          constexpr size_t kHeldBack = 64;
          size_t sent = 0;
          up.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
            raw.append(data, n);
            if (raw.size() <= sent + kHeldBack) return true;
            size_t now = raw.size() - kHeldBack - sent;
            sent += now;
            return sink.write(raw.data() + sent - now, now);
          };
          auto r = client->send(up);
          if (!r) {
            ApiError e;
            e.http_status = 502;
            e.type = "server_error";
            e.message = "upstream " + upstream_ + ": " + httplib::to_string(r.error());
            std::string chunk = "data: " + e.Body() + "\n\n";
            sink.write(raw.data() + sent, raw.size() - sent);
            sent = raw.size();
            sink.write(chunk.data(), chunk.size());
            status = 502;
          }
          Result<uint64_t> seq =
              RecordProxied(endpoint, request_body, status, "", raw, true, start, start_ns);
          if (Status st = log_ ? log_->Commit(seq) : Status::Ok(); !st.ok()) {
            std::string chunk = "data: " + ErrorFromStatus(st).Body() + "\n\n";
            sink.write(chunk.data(), chunk.size());
          } else {
            sink.write(raw.data() + sent, raw.size() - sent);
          }
          sink.done();
          return true;
        });
  }

  void SendUpstreamError(httplib::Response& res, httplib::Error error) {
    ApiError e;
    e.http_status = 502;
    e.type = "server_error";
    e.code = "upstream_unavailable";
    e.message = "upstream " + upstream_ + " did not answer: " + httplib::to_string(error);
    SendError(res, e);
  }

  // Records a proxied call: the response body, or for a stream the raw SSE text (kept as
  // response_json) with the content and tool calls reassembled from its deltas.
  Result<uint64_t> RecordProxied(const std::string& endpoint, const std::string& request_body,
                                 int status, const std::string& response_body,
                                 const std::string& sse, bool stream, SteadyClock::time_point start,
                                 int64_t start_ns) {
    if (!log_) return uint64_t{0};
    proto::LlmCall c;
    c.set_endpoint(endpoint);
    c.set_request_json(request_body);
    c.set_http_status(status);
    c.set_stream(stream);
    json req = json::parse(request_body, nullptr, false);
    if (req.is_object()) {
      c.set_model(req.value("model", ""));
      proto::SamplingParams* p = c.mutable_params();
      if (req.contains("temperature") && req["temperature"].is_number()) {
        p->set_temperature(req["temperature"].get<float>());
      }
      if (req.contains("top_p") && req["top_p"].is_number())
        p->set_top_p(req["top_p"].get<float>());
      if (req.contains("seed") && req["seed"].is_number_integer()) {
        p->set_seed(req["seed"].get<uint64_t>());
        c.set_seed_used(req["seed"].get<uint64_t>());
      }
      if (req.contains("max_tokens") && req["max_tokens"].is_number_integer()) {
        p->set_max_tokens(req["max_tokens"].get<int32_t>());
      }
    }
    std::string text, finish, id;
    std::vector<ToolCall> calls;
    auto take_message = [&](const json& r) {
      if (!r.is_object()) return;
      id = r.value("id", id);
      if (!r.contains("choices") || !r["choices"].is_array() || r["choices"].empty()) return;
      const json& ch = r["choices"][0];
      if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) {
        finish = ch["finish_reason"];
      }
      const json* m = ch.contains("message") ? &ch["message"]
                      : ch.contains("delta") ? &ch["delta"]
                                             : nullptr;
      if (ch.contains("text") && ch["text"].is_string()) text += ch["text"].get<std::string>();
      if (!m || !m->is_object()) return;
      if (m->contains("content") && (*m)["content"].is_string()) {
        text += (*m)["content"].get<std::string>();
      }
      if (m->contains("tool_calls") && (*m)["tool_calls"].is_array()) {
        for (const json& tc : (*m)["tool_calls"]) {
          size_t index = tc.contains("index") && tc["index"].is_number_integer()
                             ? tc["index"].get<size_t>()
                             : calls.size();
          if (index >= calls.size()) calls.resize(index + 1);
          ToolCall& call = calls[index];
          if (tc.contains("id") && tc["id"].is_string()) call.id = tc["id"];
          if (tc.contains("function") && tc["function"].is_object()) {
            const json& f = tc["function"];
            if (f.contains("name") && f["name"].is_string())
              call.name += f["name"].get<std::string>();
            if (f.contains("arguments") && f["arguments"].is_string()) {
              call.arguments += f["arguments"].get<std::string>();
            }
          }
        }
      }
    };
    if (!stream) {
      take_message(json::parse(response_body, nullptr, false));
      c.set_response_json(response_body);
    } else {
      std::istringstream lines(sse);
      for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
        take_message(json::parse(line.substr(6), nullptr, false));
      }
      c.set_response_json(sse);
    }
    c.set_output_text(text);
    c.set_finish_reason(status == 200 ? finish : "error");
    c.set_request_id(id);
    if (status != 200) c.set_error(response_body.empty() ? sse : response_body);
    proto::Timings* t = c.mutable_timings();
    t->set_total_ms(std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count());
    t->set_start_ns(start_ns);
    t->set_end_ns(NowNs());
    Result<uint64_t> seq = log_->RecordLlmCall(std::move(c));
    if (!seq.ok()) return seq;
    uint64_t last = *seq;
    for (const ToolCall& tc : calls) {
      proto::ToolCall e;
      e.set_call_id(tc.id);
      e.set_name(tc.name);
      e.set_arguments_json(tc.arguments);
      e.set_source("model");
      e.set_llm_call_seq(*seq);
      if (auto t = log_->RecordToolCall(std::move(e)); t.ok()) last = std::max(last, *t);
    }
    return last;
  }

  void HandleClock(const httplib::Request& req, httplib::Response& res) {
    int64_t wall = NowNs();
    int64_t mono =
        std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
            .count();
    std::string iso = Iso8601(wall);
    std::string clock = req.has_param("clock") ? req.get_param_value("clock") : "wall";
    if (clock != "wall" && clock != "monotonic") {
      ApiError e = BadRequest("clock", "clock must be 'wall' or 'monotonic'");
      Reject(req, e);
      return SendError(res, e);
    }
    uint64_t seq = 0;
    if (log_) {
      proto::ClockRead c;
      c.set_clock(clock);
      c.set_value_ns(clock == "wall" ? wall : mono);
      c.set_text(clock == "wall" ? iso : std::to_string(mono));
      Result<uint64_t> r = log_->RecordClock(std::move(c));
      if (Status st = log_->Commit(r); !st.ok()) return SendError(res, ErrorFromStatus(st));
      seq = *r;
    }
    res.set_content(json{{"clock", clock},
                         {"wall_ns", wall},
                         {"monotonic_ns", mono},
                         {"iso8601", iso},
                         {"seq", seq}}
                        .dump(),
                    "application/json");
  }

  void HandleEvents(const httplib::Request& http_req, httplib::Response& res) {
    if (Status st = log_ ? log_->Writable() : Status::Ok(); !st.ok()) {
      return SendError(res, ErrorFromStatus(st));
    }
    json body = json::parse(http_req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      ApiError e = BadRequest("", "event body must be a JSON object");
      Reject(http_req, e);
      return SendError(res, e);
    }
    json events = body.contains("events") ? body["events"] : json::array({body});
    if (!events.is_array() || events.empty()) {
      ApiError e = BadRequest("events", "'events' must be a non-empty array");
      Reject(http_req, e);
      return SendError(res, e);
    }
    // Validate everything first, so a bad batch records nothing.
    std::vector<proto::Event> parsed;
    for (size_t i = 0; i < events.size(); ++i) {
      std::string where = body.contains("events") ? "events[" + std::to_string(i) + "]" : "";
      auto ev = ParseAgentEvent(events[i], where);
      if (auto* err = std::get_if<ApiError>(&ev)) {
        Reject(http_req, *err);
        return SendError(res, *err);
      }
      parsed.push_back(std::move(std::get<proto::Event>(ev)));
    }
    json seqs = json::array();
    int duplicates = 0;
    uint64_t last_seq = 0;
    for (proto::Event& e : parsed) {
      if (!log_) {
        seqs.push_back(0);
        continue;
      }
      Result<uint64_t> seq = uint64_t{0};
      switch (e.kind_case()) {
        case proto::Event::kToolCall:
          seq = log_->RecordToolCall(std::move(*e.mutable_tool_call()));
          break;
        case proto::Event::kToolResult:
          seq = log_->RecordToolResult(std::move(*e.mutable_tool_result()));
          break;
        case proto::Event::kContextChunk:
          seq = log_->RecordContext(std::move(*e.mutable_context_chunk()));
          break;
        case proto::Event::kTemplateVar:
          seq = log_->RecordTemplateVar(std::move(*e.mutable_template_var()));
          break;
        case proto::Event::kClockRead:
          seq = log_->RecordClock(std::move(*e.mutable_clock_read()));
          break;
        default:
          seq = log_->RecordNote(std::move(*e.mutable_note()));
      }
      if (!seq.ok()) return SendError(res, ErrorFromStatus(log_->Commit(seq)));
      if (*seq == 0) ++duplicates;
      seqs.push_back(*seq);
      last_seq = std::max(last_seq, *seq);
    }
    // Acknowledged means stored: answer once the events are committed, else 503.
    if (Status st = log_ ? log_->Commit(last_seq) : Status::Ok(); !st.ok()) {
      return SendError(res, ErrorFromStatus(st));
    }
    res.set_content(
        json{{"recorded", log_ != nullptr}, {"seqs", seqs}, {"duplicates", duplicates}}.dump(),
        "application/json");
  }

  static std::variant<proto::Event, ApiError> ParseAgentEvent(const json& j,
                                                              const std::string& where) {
    auto field = [&](const char* name) {
      return where.empty() ? std::string(name) : where + "." + name;
    };
    if (!j.is_object()) return BadRequest(where, "an event must be a JSON object");
    auto type_it = j.find("type");
    if (type_it == j.end() || !type_it->is_string()) {
      return BadRequest(field("type"), "'" + field("type") +
                                           "' must be one of tool_call, "
                                           "tool_result, context, template_var, clock, note");
    }
    std::string type = type_it->get<std::string>();
    std::optional<ApiError> err;
    // Reads an optional string member; an error names it when it is not a string.
    auto str = [&](const char* name, bool required = false) -> std::string {
      auto it = j.find(name);
      if (it == j.end() || it->is_null()) {
        if (required && !err) err = BadRequest(field(name), "'" + field(name) + "' is required");
        return "";
      }
      if (it->is_string()) return it->get<std::string>();
      if (!err) err = BadRequest(field(name), "'" + field(name) + "' must be a string");
      return "";
    };
    auto num = [&](const char* name) -> double {
      auto it = j.find(name);
      if (it == j.end() || it->is_null()) return 0;
      if (it->is_number()) return it->get<double>();
      if (!err) err = BadRequest(field(name), "'" + field(name) + "' must be a number");
      return 0;
    };
    // JSON-valued members (arguments, data) may be given as objects or as text.
    auto json_text = [&](const char* name) -> std::string {
      auto it = j.find(name);
      if (it == j.end() || it->is_null()) return "";
      return it->is_string() ? it->get<std::string>() : it->dump();
    };
    proto::Event e;
    if (type == "tool_call") {
      proto::ToolCall* c = e.mutable_tool_call();
      c->set_call_id(str("call_id"));
      c->set_name(str("name", true));
      c->set_arguments_json(json_text("arguments"));
      c->set_source("agent");
    } else if (type == "tool_result") {
      proto::ToolResult* r = e.mutable_tool_result();
      r->set_call_id(str("call_id"));
      r->set_name(str("name"));
      auto content = j.find("content");
      if (content != j.end() && !content->is_string() && !content->is_null()) {
        r->set_content(content->dump());
      } else {
        r->set_content(str("content", true));
      }
      auto is_error = j.find("is_error");
      if (is_error != j.end() && !is_error->is_null()) {
        if (!is_error->is_boolean()) {
          err = BadRequest(field("is_error"), "'" + field("is_error") + "' must be a boolean");
        } else {
          r->set_is_error(is_error->get<bool>());
        }
      }
      r->set_duration_ms(num("duration_ms"));
    } else if (type == "context") {
      proto::ContextChunk* c = e.mutable_context_chunk();
      c->set_source(str("source"));
      c->set_chunk_id(str("chunk_id"));
      c->set_content(str("content", true));
      c->set_score(num("score"));
      c->set_query(str("query"));
    } else if (type == "template_var") {
      proto::TemplateVar* v = e.mutable_template_var();
      v->set_name(str("name", true));
      auto value = j.find("value");
      if (value != j.end() && !value->is_string() && !value->is_null()) {
        v->set_value(value->dump());
      } else {
        v->set_value(str("value"));
      }
      v->set_template_name(str("template"));
    } else if (type == "clock") {
      proto::ClockRead* c = e.mutable_clock_read();
      c->set_clock(j.contains("clock") ? str("clock") : "agent");
      c->set_value_ns(static_cast<int64_t>(num("value_ns")));
      c->set_text(str("text"));
    } else if (type == "note") {
      proto::Note* n = e.mutable_note();
      n->set_topic(j.contains("topic") ? str("topic") : "agent");
      n->set_text(str("text", true));
      n->set_data_json(json_text("data"));
    } else {
      ApiError e2 = BadRequest(field("type"), "unknown event type \"" + type +
                                                  "\" (tool_call, tool_result, context, "
                                                  "template_var, clock, note)");
      e2.http_status = 422;
      return e2;
    }
    if (err) return *err;
    return e;
  }

  LocalBackend backend_;
  ServerOptions options_;
  std::string upstream_;  // proxy mode: the upstream base URL
  std::unique_ptr<TokenClasses> classes_;
  std::vector<int32_t> end_tokens_;
  int32_t turn_end_token_ = 0;
  int64_t max_context_ = 0;
  std::string numerics_;
  std::string id_prefix_;
  RunLog* log_ = nullptr;
  std::atomic<bool> listen_returned_{false};
  std::atomic<int64_t> next_call_index_{0};
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

std::string ReadCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "";
}

std::vector<std::string> ReadCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      for (const char* f : {"avx2", "fma", "avx512f", "f16c", "sse4_2"}) {
        if (line.find(std::string(" ") + f) != std::string::npos) out.push_back(f);
      }
      break;
    }
  }
  return out;
}

}  // namespace

Result<LocalBackend> LoadLocalBackend(const std::string& model_dir,
                                      const engine::EngineOptions& engine_options,
                                      const SchedulerOptions& scheduler_options,
                                      bool hash_weights) {
  LocalBackend b;
  TRACE_ASSIGN_OR_RETURN(b.model, engine::Model::Load(model_dir, hash_weights));
  TRACE_ASSIGN_OR_RETURN(b.tokenizer, engine::Tokenizer::Load(model_dir + "/tokenizer.json"));
  TRACE_ASSIGN_OR_RETURN(b.chat_template, engine::ChatTemplate::FromTokenizerConfig(
                                              model_dir + "/tokenizer_config.json"));
  TRACE_ASSIGN_OR_RETURN(auto engine, engine::Engine::Create(b.model, engine_options));
  TRACE_ASSIGN_OR_RETURN(b.scheduler, Scheduler::Create(std::move(engine), scheduler_options));
  std::string dir = model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.find_last_of('/');
  b.model_name = slash == std::string::npos ? dir : dir.substr(slash + 1);
  return b;
}

void FillFingerprints(const LocalBackend& backend, proto::RunHeader* header) {
  const engine::Model& model = *backend.model;
  const engine::ModelFingerprint& fp = model.fingerprint();
  proto::ModelFingerprint* m = header->mutable_model();
  m->set_architecture(fp.architecture);
  m->set_dtype(fp.dtype);
  m->set_parameter_count(fp.parameter_count);
  m->set_weights_sha256(fp.weights_sha256);
  m->set_config_sha256(fp.config_sha256);
  m->set_tokenizer_sha256(fp.tokenizer_sha256);
  m->set_chat_template_sha256(fp.chat_template_sha256.empty()
                                  ? Sha256Hex(backend.chat_template->source())
                                  : fp.chat_template_sha256);
  m->set_model_dir(model.dir());
  m->set_model_name(backend.model_name);
  m->set_num_layers(static_cast<int32_t>(model.config().num_layers));
  m->set_vocab_size(model.config().vocab_size);

  const engine::Engine& eng = backend.scheduler->engine();
  const engine::EngineOptions& eo = eng.options();
  proto::EngineFingerprint* e = header->mutable_engine();
  e->set_version(TRACE_VERSION);
  e->set_git_revision(TRACE_GIT_REVISION);
  e->set_compiler(TRACE_COMPILER);
#ifdef TRACE_BUILD_TYPE
  e->set_build_type(TRACE_BUILD_TYPE);
#endif
  e->set_numerics(eo.numerics == kernels::Numerics::kCanonical ? kernels::kNumericsVersion
                                                               : "fast");
  e->set_kernel_impl(eo.impl == kernels::Impl::kReference ? "reference" : "auto");
  e->set_threads(eo.threads > 0 ? eo.threads
                                : static_cast<int32_t>(std::thread::hardware_concurrency()));
  e->set_max_context(eo.max_context > 0 ? eo.max_context : model.config().max_position_embeddings);

  proto::DeviceFingerprint* d = header->mutable_device();
  d->set_device(eo.device);
  d->set_description(eng.DeviceDescription());
  d->set_cpu_model(ReadCpuModel());
  for (const std::string& f : ReadCpuFlags()) d->add_cpu_flags(f);
  d->set_cpu_cores(static_cast<int32_t>(std::thread::hardware_concurrency()));
  struct utsname u {};
  if (uname(&u) == 0) {
    d->set_os(std::string(u.sysname) + " " + u.release + " " + u.machine);
  }
}

Result<std::unique_ptr<Server>> Server::CreateProxy(const std::string& upstream_base_url,
                                                    const ServerOptions& options) {
  if (upstream_base_url.rfind("http://", 0) != 0 && upstream_base_url.rfind("https://", 0) != 0) {
    return InvalidArgument("--upstream must be an http:// or https:// URL, got '" +
                           upstream_base_url + "'");
  }
  return std::unique_ptr<Server>(new LocalServer(LocalBackend{}, options, upstream_base_url));
}

std::unique_ptr<Server> Server::CreateLocal(LocalBackend backend, const ServerOptions& options) {
  return std::make_unique<LocalServer>(std::move(backend), options);
}

}  // namespace trace::recorder
