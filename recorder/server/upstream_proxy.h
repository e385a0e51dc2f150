// Proxy mode (`--upstream URL`): /v1/chat/completions, /v1/completions and /v1/models are
// forwarded to another OpenAI-compatible server as given, streaming included (SSE bytes
// are relayed as they arrive), and each model call is recorded as an LlmCall with the
// request and the response (for a stream, the raw SSE text, with content and tool calls
// reassembled from its deltas). No token ids or digests: a hosted model has none to give.
//
// Ownership: borrows the frontend, which must outlive it. Thread safety: handlers run on
// the frontend's threads, each with its own upstream client. Errors: an upstream that does
// not answer is a 502 (code upstream_unavailable) naming the URL and the socket error; a
// call the store could not take is a 503 (a stream: its last bytes, the terminator, are
// held back until the commit and replaced by a 503 error event).
#pragma once

#include <string>
#include <utility>

#include "recorder/server/frontend.h"
#include "recorder/server/http_util.h"

namespace trace::recorder {

class UpstreamProxy {
 public:
  // Credentials in the URL (https://user:pass@host/v1) are sent as basic auth (unless
  // $TRACE_UPSTREAM_API_KEY gives a bearer token) and never appear in messages.
  UpstreamProxy(HttpFrontend* frontend, const std::string& upstream_base_url);
  // Adds the /v1/* routes to the frontend.
  void Register();

  // "http://host:port/v1" -> ("http://host:port", "/v1").
  static std::pair<std::string, std::string> SplitUrl(const std::string& url);

 private:
  void Forward(const httplib::Request& req, httplib::Response& res, const std::string& path);
  void SendUpstreamError(httplib::Response& res, httplib::Error error);
  // Records a proxied call: the response body, or for a stream the raw SSE text (kept as
  // response_json) with the content and tool calls reassembled from its deltas. Returns
  // the last seq appended (0 when not recording).
  Result<uint64_t> RecordProxiedCall(const std::string& endpoint, const std::string& request_body,
                                     int status, const std::string& response_body,
                                     const std::string& sse, bool stream,
                                     SteadyClock::time_point start, int64_t start_ns);

  HttpFrontend* frontend_;
  std::string upstream_;  // without credentials
  std::string user_, password_;
};

}  // namespace trace::recorder
