// POST /v1/embeddings in proxy mode: forwarded to the upstream's /embeddings and recorded
// as an LlmCall with api openai.embeddings (upstream_proxy.h). Never streamed, and nothing
// in it maps onto a WireFormat, so it has its own small path beside ForwardCall; keys,
// pooling, the 502 of an upstream that does not answer and "acknowledged means stored" are
// the same.
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "recorder/api/json_body.h"
#include "recorder/api/openai_embeddings.h"
#include "recorder/server/upstream_proxy.h"

namespace trace::recorder {

void UpstreamProxy::ForwardEmbeddings(const httplib::Request& req, httplib::Response& res) {
  // `trace rerun`: the recording answers first; --edit-call replaces the body sent upstream.
  CallGate::Decision gate;
  if (CallGate* g = frontend_->gate()) gate = g->AdmitEmbeddingsCall(req, res);
  if (gate.answered) return;
  Exchange x;
  x.endpoint = req.path;
  x.request_body = gate.live_body ? *gate.live_body : req.body;
  x.start = SteadyClock::now();
  x.start_ns = WallClockNs();
  std::string content_type = "application/json";
  {
    UpstreamPool::Lease lease = pool_.Acquire();
    httplib::Result r = lease.client().Post(UpstreamPath(req.path).c_str(),
                                            UpstreamHeaders(req, /*anthropic=*/false),
                                            x.request_body, "application/json");
    if (!r) {
      lease.Discard();
      ApiError e = Unreachable(r.error());
      x.status = e.http_status;
      x.body = e.Body();
      x.error = e.message;
    } else {
      x.status = r->status;
      x.body = r->body;
      x.request_id = r->has_header("x-request-id") ? r->get_header_value("x-request-id")
                                                   : r->get_header_value("request-id");
      if (std::string type = r->get_header_value("Content-Type"); !type.empty()) {
        content_type = std::move(type);
      }
    }
  }
  // Acknowledged means stored: the agent gets the answer once the call is committed.
  if (Status st = frontend_->Commit(RecordEmbeddingsCall(x)); !st.ok()) {
    return SendError(res, ErrorFromStatus(st));
  }
  res.status = x.status;
  res.set_content(x.body, content_type);
}

Result<uint64_t> UpstreamProxy::RecordEmbeddingsCall(const Exchange& x) {
  RunLog* log = frontend_->log();
  if (!log) return uint64_t{0};
  proto::LlmCall c;
  c.set_api(std::string(kApiEmbeddings));
  c.set_endpoint(x.endpoint);
  // Text fields must be UTF-8 for the store; a client or upstream could send anything.
  c.set_request_json(engine::SanitizeUtf8(x.request_body));
  c.set_response_json(engine::SanitizeUtf8(x.body));
  c.set_http_status(x.status);
  c.set_upstream(upstream_);
  c.set_upstream_request_id(engine::SanitizeUtf8(x.request_id));
  c.set_model(engine::SanitizeUtf8(ReadEmbeddingsRequest(x.request_body).model));
  if (x.status != 200) {
    c.set_finish_reason("error");
    c.set_error(x.error.empty() ? engine::SanitizeUtf8(x.body) : x.error);
  } else {
    EmbeddingsSummary s = ReadEmbeddingsResponse(ParseJsonOrDiscarded(x.body));
    if (s.has_usage) c.mutable_usage()->set_input_tokens(s.input_tokens);
  }
  proto::Timings* t = c.mutable_timings();
  t->set_total_ms(std::chrono::duration<double, std::milli>(SteadyClock::now() - x.start).count());
  t->set_start_ns(x.start_ns);
  t->set_end_ns(WallClockNs());
  return log->RecordLlmCall(std::move(c));
}

}  // namespace trace::recorder
