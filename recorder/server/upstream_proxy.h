// Proxy mode (`--upstream URL`): the model API of every wire format (/v1/chat/completions,
// /v1/completions, /v1/responses, /v1/messages and /messages) is forwarded to another
// server (OpenAI, Anthropic, or any compatible one) as given, streaming included, and each
// model call is recorded as an LlmCall: the API, the request as received, the response as
// the agent got it (a stream byte for byte, as the upstream's events arrived, and folded
// into the API's non-streamed body), the upstream's status, usage, ids and request id, and
// the tool calls it made. POST /v1/embeddings is forwarded and recorded the same way (api
// openai.embeddings, upstream_embeddings.cc): the request, the body the agent got, status,
// model, usage. No token ids or digests: a hosted model has none to give, so
// `trace replay` reports such calls as "recorded only". /v1/models, /v1/responses/{id} and
// /v1/messages/count_tokens are relayed unrecorded.
//
// Upstream keys come from this process's environment, never from the agent and never into
// the store: $TRACE_UPSTREAM_API_KEY, else $OPENAI_API_KEY (OpenAI routes, sent as a bearer
// token) or $ANTHROPIC_API_KEY (Anthropic routes, sent as x-api-key); with none of them,
// credentials in the URL (https://user:pass@host/v1) are sent as basic auth. The URL is
// shown and recorded without them.
// anthropic-version / anthropic-beta / openai-beta request headers are passed on.
// Connections to the upstream are pooled (keep-alive, TCP_NODELAY; upstream_pool.h).
//
// Ownership: borrows the frontend, which must outlive it; owns the pool. Thread safety:
// handlers run on the frontend's threads; a streamed call has one more thread reading the
// upstream (upstream_relay.cc). Errors: an upstream that does not answer is a 502 (code
// upstream_unavailable, in the API's error shape) naming the URL and the socket error, and
// is recorded as a failed call. Acknowledged means stored: a call is answered once it is
// committed; one the store could not take is a 503 in the API's shape (a stream: its last
// bytes, the terminator, are held back until the commit and replaced by an error event).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "recorder/api/model_call.h"
#include "recorder/secrets.h"
#include "recorder/server/frontend.h"
#include "recorder/server/http_util.h"
#include "recorder/server/upstream_pool.h"

namespace trace::recorder {

class UpstreamProxy {
 public:
  // Credentials in the URL (https://user:pass@host/v1) are sent as basic auth (unless an
  // upstream key is set in the environment) and never appear in messages or the recording.
  // The upstream keys are read from the environment here, once.
  UpstreamProxy(HttpFrontend* frontend, const std::string& upstream_base_url);
  // Adds the model API routes to the frontend.
  void Register();

  // "http://host:port/v1" -> ("http://host:port", "/v1").
  static std::pair<std::string, std::string> SplitUrl(const std::string& url);

  // One proxied model call, from the request to what the agent got (for the recording).
  struct Exchange {
    const WireFormat* format = nullptr;  // null: an embeddings call
    std::string endpoint;                // our route, e.g. "/v1/messages"
    std::string request_body;            // as received
    bool stream = false;
    int status = 0;          // the upstream's HTTP status (502: it did not answer)
    std::string body;        // the reply as sent to the agent (non-streamed, or an error)
    std::string sent;        // a stream's bytes as written to the agent
    std::string request_id;  // the upstream's x-request-id / request-id
    std::string error;       // transport error, or why a stream ended early
    bool cancelled = false;  // the agent stopped reading the stream
    SteadyClock::time_point start;
    int64_t start_ns = 0;
  };

 private:
  UpstreamProxy(HttpFrontend* frontend, UrlWithoutCredentials upstream);
  // A model call: forwarded, answered, recorded.
  void ForwardCall(const WireFormat& format, const httplib::Request& req, httplib::Response& res);
  // Streamed (upstream_relay.cc): the upstream's events are relayed as they arrive; an
  // upstream error status is answered as such, not inside a 200 stream.
  void RelayStream(const WireFormat& format, const httplib::Request& req, httplib::Response& res,
                   const std::string& path, const httplib::Headers& headers,
                   std::shared_ptr<Exchange> exchange);
  // POST /v1/embeddings (upstream_embeddings.cc): forwarded, answered once recorded.
  void ForwardEmbeddings(const httplib::Request& req, httplib::Response& res);
  // Records an embeddings call (x.format is null); returns the seq appended (0: not
  // recording).
  Result<uint64_t> RecordEmbeddingsCall(const Exchange& x);
  // Anything else (models, stored responses, token counts): relayed, not recorded.
  void Relay(const httplib::Request& req, httplib::Response& res, const std::string& path);
  // The upstream path for our route ("/v1/messages" -> prefix + "/messages").
  std::string UpstreamPath(const std::string& route) const;
  // The credentials and passed-on headers for a request to the upstream.
  httplib::Headers UpstreamHeaders(const httplib::Request& req, bool anthropic) const;
  ApiError Unreachable(httplib::Error error) const;
  // Records the call; returns the last seq appended (0 when not recording).
  Result<uint64_t> RecordProxiedCall(const Exchange& x);
  // Answers a non-streamed call with x's status and body once `last_seq` is committed, else
  // with the 503 in the API's shape.
  void Answer(const WireFormat& format, httplib::Response& res, const Exchange& x,
              const Result<uint64_t>& last_seq, const std::string& content_type);

  HttpFrontend* frontend_;
  std::string upstream_;  // without credentials (what may be shown and recorded)
  std::string user_, password_;
  std::string origin_;
  std::string prefix_;
  UpstreamPool pool_;
  // $TRACE_UPSTREAM_API_KEY, else $OPENAI_API_KEY / $ANTHROPIC_API_KEY, as at construction.
  const std::string openai_key_, anthropic_key_;
};

}  // namespace trace::recorder
