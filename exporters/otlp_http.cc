#include "exporters/otlp_http.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include "base/build_info.h"
#include "base/escape.h"

namespace trace::exporters {
namespace {

bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

Result<std::string> PercentDecode(std::string_view s, std::string_view where) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      return InvalidArgument(std::string(where) + ": bad percent-encoding in '" +
                             EscapeForDisplay(s) + "'");
    }
    out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
    i += 2;
  }
  return out;
}

// google.rpc.Status {int32 code = 1; string message = 2;}, the body of an OTLP/HTTP error,
// described at run time so protobuf's own parser reads it (no hand-written decoding).
std::string RpcStatusMessage(const std::string& body) {
  static const google::protobuf::Descriptor* descriptor = [] {
    google::protobuf::FileDescriptorProto file;
    file.set_name("trace_otlp_rpc_status.proto");
    file.set_package("google.rpc");
    file.set_syntax("proto3");
    auto* m = file.add_message_type();
    m->set_name("Status");
    auto* code = m->add_field();
    code->set_name("code");
    code->set_number(1);
    code->set_type(google::protobuf::FieldDescriptorProto::TYPE_INT32);
    code->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
    auto* message = m->add_field();
    message->set_name("message");
    message->set_number(2);
    message->set_type(google::protobuf::FieldDescriptorProto::TYPE_STRING);
    message->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
    static google::protobuf::DescriptorPool pool;
    const auto* f = pool.BuildFile(file);
    return f ? f->FindMessageTypeByName("Status") : nullptr;
  }();
  if (!descriptor) return "";
  static google::protobuf::DynamicMessageFactory factory;
  std::unique_ptr<google::protobuf::Message> status(factory.GetPrototype(descriptor)->New());
  if (!status->ParseFromString(body)) return "";
  return status->GetReflection()->GetString(*status, descriptor->FindFieldByName("message"));
}

// What a non-2xx answer said: the google.rpc.Status message, else printable body text.
std::string ErrorDetail(const httplib::Response& r) {
  std::string type = Lower(r.get_header_value("Content-Type"));
  if (type.find("protobuf") != std::string::npos) {
    std::string m = RpcStatusMessage(r.body);
    if (!m.empty()) return m;
  }
  std::string text;
  for (char c : r.body.substr(0, 300)) {
    text.push_back(c == '\n' || c == '\r' || c == '\t'    ? ' '
                   : static_cast<unsigned char>(c) < 0x20 ? '?'
                                                          : c);
  }
  return Trim(text);
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

std::string TransportError(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "could not connect (nothing listening there?)";
    case httplib::Error::ConnectionTimeout:
      return "connection timed out";
    case httplib::Error::Read:
      return "no answer (read failed or timed out)";
    case httplib::Error::Write:
      return "sending the request failed";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLServerVerification:
      return "the server's TLS certificate did not verify";
    case httplib::Error::SSLLoadingCerts:
      return "could not load the CA certificates";
    default:
      return httplib::to_string(e);
  }
}

// Failures worth another attempt; a TLS or certificate failure will not go away.
bool RetryableTransport(httplib::Error e) {
  return e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout ||
         e == httplib::Error::Read || e == httplib::Error::Write;
}

bool Retryable(int status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

}  // namespace

Result<HttpUrl> OtlpTracesUrl(std::string_view endpoint) {
  TRACE_ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl(endpoint));
  std::string path = url.path;
  std::string query;
  size_t q = path.find('?');
  if (q != std::string::npos) {
    query = path.substr(q);
    path = path.substr(0, q);
  }
  const std::string suffix = "/v1/traces";
  if (path.size() < suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    while (!path.empty() && path.back() == '/') path.pop_back();
    path += suffix;
  }
  url.path = path + query;
  return url;
}

Result<std::pair<std::string, std::string>> ParseOtlpHeader(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgument("OTLP header '" + EscapeForDisplay(text) + "' is not KEY=VALUE");
  }
  std::string key = Trim(text.substr(0, eq));
  std::string value = Trim(text.substr(eq + 1));
  if (key.empty() || !std::all_of(key.begin(), key.end(), IsTokenChar)) {
    return InvalidArgument("OTLP header name '" + EscapeForDisplay(key) +
                           "' is not a valid HTTP header name");
  }
  if (value.find_first_of("\r\n") != std::string::npos) {
    return InvalidArgument("OTLP header '" + EscapeForDisplay(key) +
                           "' has a line break in its value");
  }
  std::string lower = Lower(key);
  if (lower == "content-type" || lower == "content-length") {
    return InvalidArgument("OTLP header '" + EscapeForDisplay(key) +
                           "' is set by trace and cannot be given");
  }
  return std::make_pair(key, value);
}

Result<HttpHeaders> ParseOtlpHeaderList(std::string_view text, std::string_view source) {
  HttpHeaders out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string entry = Trim(text.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) continue;
    size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument(std::string(source) + ": entry '" + EscapeForDisplay(entry) +
                             "' is not KEY=VALUE");
    }
    TRACE_ASSIGN_OR_RETURN(std::string key, PercentDecode(Trim(entry.substr(0, eq)), source));
    TRACE_ASSIGN_OR_RETURN(std::string value, PercentDecode(Trim(entry.substr(eq + 1)), source));
    auto parsed = ParseOtlpHeader(key + "=" + value);
    if (!parsed.ok())
      return InvalidArgument(std::string(source) + ": " + parsed.status().message());
    out.push_back(std::move(*parsed));
  }
  return out;
}

Result<HttpHeaders> ResolveOtlpHeaders(const char* env_headers, const char* env_trace_headers,
                                       const std::vector<std::string>& flags) {
  HttpHeaders out;
  auto put = [&out](std::pair<std::string, std::string> h) {
    std::string key = Lower(h.first);
    out.erase(std::remove_if(out.begin(), out.end(),
                             [&](const auto& e) { return Lower(e.first) == key; }),
              out.end());
    out.push_back(std::move(h));
  };
  if (env_headers && *env_headers) {
    TRACE_ASSIGN_OR_RETURN(HttpHeaders h,
                           ParseOtlpHeaderList(env_headers, "OTEL_EXPORTER_OTLP_HEADERS"));
    for (auto& e : h) put(std::move(e));
  }
  if (env_trace_headers && *env_trace_headers) {
    TRACE_ASSIGN_OR_RETURN(
        HttpHeaders h, ParseOtlpHeaderList(env_trace_headers, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"));
    for (auto& e : h) put(std::move(e));
  }
  for (const std::string& f : flags) {
    TRACE_ASSIGN_OR_RETURN(auto h, ParseOtlpHeader(f));
    put(std::move(h));
  }
  return out;
}

Result<OtlpHttpResult> PostOtlp(const OtlpRequest& request, const OtlpHttpOptions& options) {
  TRACE_ASSIGN_OR_RETURN(HttpUrl url, OtlpTracesUrl(options.endpoint));
  OtlpHttpResult result;
  result.url = url.Origin() + url.path;
  httplib::Client client(url.Origin());
  client.set_connection_timeout(options.timeout_s, 0);
  client.set_read_timeout(options.timeout_s, 0);
  client.set_write_timeout(options.timeout_s, 0);
  if (!options.ca_file.empty()) {
    if (url.scheme != "https") {
      return InvalidArgument("a CA certificate file was given for " + EscapeForDisplay(result.url) +
                             ", which is not https");
    }
    std::ifstream ca(options.ca_file);
    if (!ca)
      return NotFound(EscapePathForDisplay(options.ca_file) +
                      ": cannot open the CA certificate file");
    client.set_ca_cert_path(options.ca_file.c_str());
  }
  httplib::Headers headers;
  headers.emplace("User-Agent", std::string("trace/") + TRACE_VERSION);
  for (const auto& [k, v] : options.headers) headers.emplace(k, v);

  std::vector<OtlpRequest> batches = SplitOtlpRequest(request, options.max_spans_per_request);
  for (size_t b = 0; b < batches.size(); ++b) {
    const OtlpRequest& batch = batches[b];
    int spans = 0;
    for (const auto& rs : batch.resource_spans()) {
      for (const auto& ss : rs.scope_spans()) spans += ss.spans_size();
    }
    if (options.progress)
      options.progress(static_cast<int>(b), static_cast<int>(batches.size()), spans);
    std::string body;
    if (!batch.SerializeToString(&body)) return Internal("OTLP protobuf encoding failed");
    int backoff_ms = options.initial_backoff_ms;
    for (int attempt = 1;; ++attempt) {
      auto r = client.Post(url.path, headers, body, "application/x-protobuf");
      const bool last = attempt >= std::max(1, options.max_attempts);
      int wait_ms = backoff_ms;
      if (!r) {
        if (last || !RetryableTransport(r.error())) {
          return Unavailable("OTLP endpoint " + result.url +
                             (r.error() == httplib::Error::Connection ||
                                      r.error() == httplib::Error::ConnectionTimeout
                                  ? " unreachable: "
                                  : " failed: ") +
                             TransportError(r.error()) + " (" + std::to_string(attempt) +
                             (attempt == 1 ? " attempt)" : " attempts)"));
        }
      } else if (r->status >= 200 && r->status < 300) {
        opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse answer;
        if (!r->body.empty() && answer.ParseFromString(r->body) && answer.has_partial_success() &&
            answer.partial_success().rejected_spans() > 0) {
          return FailedPrecondition("OTLP endpoint " + result.url + " rejected " +
                                    std::to_string(answer.partial_success().rejected_spans()) +
                                    " of " + std::to_string(spans) +
                                    " spans: " + answer.partial_success().error_message());
        }
        break;
      } else {
        std::string detail = ErrorDetail(*r);
        std::string reason = ReasonPhrase(r->status);
        if (!Retryable(r->status) || last) {
          return Unavailable("OTLP endpoint " + result.url + " answered HTTP " +
                             std::to_string(r->status) + (reason.empty() ? "" : " " + reason) +
                             (detail.empty() ? "" : ": " + detail) +
                             (attempt > 1 ? " (" + std::to_string(attempt) + " attempts)" : ""));
        }
        std::string retry_after = r->get_header_value("Retry-After");
        if (!retry_after.empty() &&
            std::all_of(retry_after.begin(), retry_after.end(),
                        [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
            retry_after.size() < 6) {
          wait_ms = std::min(30'000, std::stoi(retry_after) * 1000);
        }
      }
      ++result.retries;
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      backoff_ms *= 2;
    }
    ++result.requests;
    result.spans += spans;
    result.bytes += static_cast<int64_t>(body.size());
  }
  return result;
}

}  // namespace trace::exporters
