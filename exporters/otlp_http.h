// OTLP/HTTP export: POSTs an OTLP request, protobuf-encoded, to a collector's /v1/traces
// (OTLP specification, "OTLP/HTTP"), in batches of at most max_spans_per_request spans,
// retrying what the specification calls retryable.
//
// Ownership: value types; each call makes its own HTTP client. Thread safety: reentrant.
// Errors: one line naming the URL and what went wrong: unreachable (with httplib's reason,
// after the retries), a non-2xx answer (status, reason and the collector's message from a
// google.rpc.Status body or the text body), or a 2xx answer whose partial_success says
// spans were rejected. A bad header or URL is InvalidArgument naming it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "exporters/otlp_trace.h"
#include "exporters/url.h"

namespace trace::exporters {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct OtlpHttpOptions {
  std::string endpoint;  // "http://host:4318"; /v1/traces is appended unless already there
  HttpHeaders headers;   // sent with every request
  int timeout_s = 10;    // connect, read and write timeout per attempt
  std::string ca_file;   // https: trust these CA certificates (PEM) instead of the system's
  // Attempts per request: a connection failure or HTTP 429/502/503/504 is retried after
  // the Retry-After the server gave (at most 30 s), else after initial_backoff_ms,
  // doubling each time.
  int max_attempts = 3;
  int initial_backoff_ms = 500;
  size_t max_spans_per_request = 512;
  // Called before each request is sent (batch index, batch count, spans in it).
  std::function<void(int, int, int)> progress;
};

struct OtlpHttpResult {
  std::string url;    // where the requests went
  int requests = 0;   // HTTP requests that succeeded
  int64_t spans = 0;  // spans sent
  int64_t bytes = 0;  // protobuf bytes sent
  int retries = 0;    // attempts beyond the first, over all requests
};

Result<OtlpHttpResult> PostOtlp(const OtlpRequest& request, const OtlpHttpOptions& options);

// The URL requests go to: the endpoint with "/v1/traces" appended to its path unless the
// path already ends with it.
Result<HttpUrl> OtlpTracesUrl(std::string_view endpoint);

// One header "KEY=VALUE" (--otlp-header). The key must be an HTTP token; the value may not
// hold CR or LF; Content-Type and Content-Length are set by trace and refused here.
Result<std::pair<std::string, std::string>> ParseOtlpHeader(std::string_view text);
// OTEL_EXPORTER_OTLP_HEADERS: "k1=v1,k2=v2" with percent-encoded values (decoded here);
// empty entries are skipped. `source` names the variable in errors.
Result<HttpHeaders> ParseOtlpHeaderList(std::string_view text, std::string_view source);
// The headers to send: OTEL_EXPORTER_OTLP_HEADERS (`env_headers`, may be null), then
// OTEL_EXPORTER_OTLP_TRACES_HEADERS (`env_trace_headers`), then each --otlp-header, a later
// entry replacing an earlier one of the same name (case-insensitive).
Result<HttpHeaders> ResolveOtlpHeaders(const char* env_headers, const char* env_trace_headers,
                                       const std::vector<std::string>& flags);

}  // namespace trace::exporters
