#include "recorder/server/upstream_proxy.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/json_body.h"
#include "recorder/openai_api.h"
#include "recorder/secrets.h"
#include "recorder/server/call_recording.h"

namespace trace::recorder {
namespace {

// How many bytes of a relayed stream wait for the call's commit: at least its terminator
// ("data: [DONE]\n\n").
constexpr size_t kHeldBack = 64;

}  // namespace

using json = nlohmann::json;

namespace {
// The most tool calls one proxied response is reassembled into.
constexpr size_t kMaxProxiedToolCalls = 128;
}  // namespace

UpstreamProxy::UpstreamProxy(HttpFrontend* frontend, const std::string& upstream_base_url)
    : frontend_(frontend) {
  UrlWithoutCredentials u = SplitUrlCredentials(upstream_base_url);
  upstream_ = std::move(u.url);
  user_ = std::move(u.user);
  password_ = std::move(u.password);
}

std::pair<std::string, std::string> UpstreamProxy::SplitUrl(const std::string& url) {
  size_t scheme = url.find("://");
  size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (path == std::string::npos) return {url, ""};
  std::string prefix = url.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {url.substr(0, path), prefix};
}

void UpstreamProxy::Register() {
  httplib::Server& http = frontend_->http();
  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    Forward(req, res, "/models");
  });
  http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    Forward(req, res, "/models/" + std::string(req.matches[1]));
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res) || !frontend_->Recordable(res)) return;
    Forward(req, res, "/chat/completions");
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res) || !frontend_->Recordable(res)) return;
    Forward(req, res, "/completions");
  });
}

void UpstreamProxy::Forward(const httplib::Request& req, httplib::Response& res,
                            const std::string& path) {
  RunLog* log = frontend_->log();
  auto [origin, prefix] = SplitUrl(upstream_);
  auto start = SteadyClock::now();
  int64_t start_ns = NowNs();
  json body = ParseJsonOrDiscarded(req.body);
  bool stream = body.is_object() && body.value("stream", false) == true;
  httplib::Headers headers;
  const char* key = getenv("TRACE_UPSTREAM_API_KEY");
  if (key && *key) headers.emplace("Authorization", std::string("Bearer ") + key);
  auto client = std::make_shared<httplib::Client>(origin);
  if (!(key && *key) && !user_.empty()) client->set_basic_auth(user_.c_str(), password_.c_str());
  client->set_read_timeout(600, 0);
  client->set_connection_timeout(10, 0);
  // Small requests and SSE events go out at once, not after a delayed ACK (Nagle).
  client->set_tcp_nodelay(true);
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
  if (log && body.is_object()) {
    auto parsed = ParseCompletionRequest(req.body, path == "/chat/completions");
    if (auto* p = std::get_if<CompletionRequest>(&parsed)) RecordToolResultsFromMessages(log, *p);
  }
  if (!stream) {
    auto r = client->Post((prefix + path).c_str(), headers, req.body, "application/json");
    if (!r) return SendUpstreamError(res, r.error());
    // Acknowledged means stored: answer once the call is committed, else 503.
    Result<uint64_t> last =
        RecordProxiedCall(endpoint, req.body, r->status, r->body, "", false, start, start_ns);
    if (Status st = frontend_->Commit(last); !st.ok()) return SendError(res, ErrorFromStatus(st));
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
        size_t sent = 0;
        auto send_upto = [&](size_t end) {
          bool ok = end <= sent || sink.write(raw.data() + sent, end - sent);
          sent = std::max(sent, end);
          return ok;
        };
        up.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
          raw.append(data, n);
          return send_upto(raw.size() > kHeldBack ? raw.size() - kHeldBack : 0);
        };
        auto r = client->send(up);
        if (!r) {
          ApiError e;
          e.http_status = 502;
          e.type = "server_error";
          e.message = "upstream " + upstream_ + ": " + httplib::to_string(r.error());
          std::string chunk = "data: " + e.Body() + "\n\n";
          send_upto(raw.size());
          sink.write(chunk.data(), chunk.size());
          status = 502;
        }
        Result<uint64_t> last =
            RecordProxiedCall(endpoint, request_body, status, "", raw, true, start, start_ns);
        if (Status st = frontend_->Commit(last); !st.ok()) {
          std::string chunk = "data: " + ErrorFromStatus(st).Body() + "\n\n";
          sink.write(chunk.data(), chunk.size());
        } else {
          send_upto(raw.size());
        }
        sink.done();
        return true;
      });
}

void UpstreamProxy::SendUpstreamError(httplib::Response& res, httplib::Error error) {
  ApiError e;
  e.http_status = 502;
  e.type = "server_error";
  e.code = "upstream_unavailable";
  e.message = "upstream " + upstream_ + " did not answer: " + httplib::to_string(error);
  SendError(res, e);
}

Result<uint64_t> UpstreamProxy::RecordProxiedCall(const std::string& endpoint,
                                                  const std::string& request_body, int status,
                                                  const std::string& response_body,
                                                  const std::string& sse, bool stream,
                                                  SteadyClock::time_point start,
                                                  int64_t start_ns) {
  RunLog* log = frontend_->log();
  if (!log) return uint64_t{0};
  proto::LlmCall c;
  c.set_endpoint(endpoint);
  c.set_request_json(request_body);
  c.set_http_status(status);
  c.set_stream(stream);
  json req = ParseJsonOrDiscarded(request_body);
  if (req.is_object()) {
    if (auto m = req.find("model"); m != req.end() && m->is_string()) c.set_model(*m);
    proto::SamplingParams* p = c.mutable_params();
    // Numbers are range-checked before any cast: the upstream judged the request, not us,
    // so an out-of-range value is simply not copied.
    auto as_float = [&](const char* name, auto set) {
      auto it = req.find(name);
      if (it == req.end() || !it->is_number()) return;
      const double d = it->get<double>();
      if (std::isfinite(d) && std::abs(d) <= std::numeric_limits<float>::max()) {
        set(static_cast<float>(d));
      }
    };
    as_float("temperature", [&](float v) { p->set_temperature(v); });
    as_float("top_p", [&](float v) { p->set_top_p(v); });
    if (auto s = req.find("seed"); s != req.end() && s->is_number_integer()) {
      // Signed seeds are kept as their two's-complement bits (as the local engine does).
      const uint64_t seed =
          s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
      p->set_seed(seed);
      c.set_seed_used(seed);
    }
    if (auto m = req.find("max_tokens"); m != req.end() && m->is_number_integer()) {
      const int64_t v =
          m->is_number_unsigned()
              ? static_cast<int64_t>(std::min<uint64_t>(m->get<uint64_t>(), INT32_MAX))
              : m->get<int64_t>();
      if (v >= 0 && v <= INT32_MAX) p->set_max_tokens(static_cast<int32_t>(v));
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
        size_t index = calls.size();
        if (tc.contains("index") && tc["index"].is_number_unsigned()) {
          index = tc["index"].get<uint64_t>() < kMaxProxiedToolCalls
                      ? static_cast<size_t>(tc["index"].get<uint64_t>())
                      : kMaxProxiedToolCalls;
        }
        // An upstream's index is not trusted to size memory.
        if (index >= kMaxProxiedToolCalls) continue;
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
    take_message(ParseJsonOrDiscarded(response_body));
    c.set_response_json(response_body);
  } else {
    std::istringstream lines(sse);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
      take_message(ParseJsonOrDiscarded(line.substr(6)));
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
  TRACE_ASSIGN_OR_RETURN(uint64_t seq, log->RecordLlmCall(std::move(c)));
  return RecordModelToolCalls(log, seq, calls);
}

}  // namespace trace::recorder
