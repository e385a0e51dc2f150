#include "recorder/server/request_guard.h"

#include <arpa/inet.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "base/hash.h"

namespace trace::recorder {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// HTTP optional whitespace (spaces and tabs) off both ends.
std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsLoopbackName(const std::string& name) {
  if (name == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, name.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return v6.s6_addr[12] == 127;
  }
  return false;
}

bool IsWildcard(const std::string& name) {
  return name.empty() || name == "0.0.0.0" || name == "::" || name == "*";
}

bool IsBodyMethod(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

ApiError Forbidden(std::string code, std::string message) {
  ApiError e;
  e.http_status = 403;
  e.type = "permission_error";
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

ApiError Framing(int status, std::string code, std::string message) {
  ApiError e;
  e.http_status = status;
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

}  // namespace

std::string HostName(std::string_view host_header) {
  std::string_view h = TrimOws(host_header);
  if (!h.empty() && h.front() == '[') {
    size_t close = h.find(']');
    h = close == std::string_view::npos ? h.substr(1) : h.substr(1, close - 1);
  } else if (std::count(h.begin(), h.end(), ':') == 1) {
    h = h.substr(0, h.find(':'));
  }
  std::string name = Lower(h);
  while (!name.empty() && name.back() == '.') name.pop_back();
  return name;
}

bool HostAllowed(std::string_view host_header, std::string_view listen_host) {
  if (TrimOws(host_header).empty()) return true;  // HTTP/1.0 clients may send none
  const std::string listen = HostName(listen_host);
  if (IsWildcard(listen)) return true;
  const std::string name = HostName(host_header);
  return IsLoopbackName(name) || name == listen;
}

bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed) {
  const std::string o = Lower(TrimOws(origin));
  for (const std::string& a : allowed) {
    std::string want = Lower(TrimOws(a));
    while (!want.empty() && want.back() == '/') want.pop_back();
    if (want == "*" || want == o) return true;
  }
  return false;
}

std::optional<ApiError> CheckHost(const httplib::Request& req, std::string_view listen_host) {
  const std::string host = req.get_header_value("Host");
  if (HostAllowed(host, listen_host)) return std::nullopt;
  return Forbidden("forbidden_host",
                   "Host '" + HostName(host) +
                       "' is not a name of this server (loopback names only, as a guard "
                       "against DNS rebinding; serve another name with --host NAME)");
}

std::optional<ApiError> CheckOrigin(const httplib::Request& req,
                                    const std::vector<std::string>& allowed_origins) {
  const std::string origin = req.get_header_value("Origin");
  if (!origin.empty()) {
    if (OriginAllowed(origin, allowed_origins)) return std::nullopt;
    return Forbidden("forbidden_origin",
                     "requests from the web origin '" + origin +
                         "' are refused (a web page must not drive the recorder; allow one "
                         "with --allowed-origin ORIGIN)");
  }
  // A browser's cross-site request that carries no Origin (an <img> or a form GET).
  const std::string site = Lower(req.get_header_value("Sec-Fetch-Site"));
  if (site.empty() || site == "none" || site == "same-origin" ||
      OriginAllowed("*", allowed_origins)) {
    return std::nullopt;
  }
  return Forbidden("forbidden_origin", "a browser's " + site +
                                           " request without an allowed Origin is refused "
                                           "(allow origins with --allowed-origin ORIGIN)");
}

std::string PresentedKey(const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  std::string_view auth = TrimOws(header);
  constexpr std::string_view kBearer = "bearer ";
  if (auth.size() > kBearer.size() && strncasecmp(auth.data(), "bearer ", kBearer.size()) == 0) {
    return std::string(TrimOws(auth.substr(kBearer.size())));
  }
  return std::string(TrimOws(req.get_header_value("x-api-key")));
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Equal-length digests compared without an early exit: the time depends on neither the
  // secret's length nor on how much of it a guess got right.
  const std::string da = Sha256Hex(a);
  const std::string db = Sha256Hex(b);
  unsigned diff = 0;
  for (size_t i = 0; i < da.size(); ++i) {
    diff |= static_cast<unsigned>(static_cast<unsigned char>(da[i]) ^
                                  static_cast<unsigned char>(db[i]));
  }
  return diff == 0;
}

std::optional<ApiError> CheckApiKey(const httplib::Request& req, const std::string& api_key) {
  if (api_key.empty()) return std::nullopt;
  const std::string presented = PresentedKey(req);
  if (!presented.empty() && ConstantTimeEquals(presented, api_key)) return std::nullopt;
  ApiError e;
  e.http_status = 401;
  e.code = "invalid_api_key";
  // OpenAI's clients send a bearer token, Anthropic's the x-api-key header.
  const bool bearer =
      strncasecmp(std::string(TrimOws(req.get_header_value("Authorization"))).c_str(), "bearer ",
                  7) == 0;
  e.message = presented.empty() ? "missing API key: send 'Authorization: Bearer $OPENAI_API_KEY' "
                                  "or 'x-api-key: $ANTHROPIC_API_KEY'"
                                : std::string("invalid API key in the ") +
                                      (bearer ? "Authorization" : "x-api-key") + " header";
  return e;
}

bool AnnouncesBody(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  const std::string cl = req.get_header_value("Content-Length");
  return !cl.empty() && cl.find_first_not_of('0') != std::string::npos;
}

std::optional<ApiError> CheckBodyFraming(const httplib::Request& req, size_t max_body_bytes) {
  if (req.get_header_value_count("Content-Length") > 1 ||
      req.get_header_value_count("Transfer-Encoding") > 1) {
    return Framing(400, "invalid_framing", "more than one Content-Length or Transfer-Encoding");
  }
  const std::string te = req.get_header_value("Transfer-Encoding");
  const bool chunked = !te.empty();
  if (chunked && strcasecmp(std::string(TrimOws(te)).c_str(), "chunked") != 0) {
    return Framing(400, "unsupported_transfer_encoding",
                   "Transfer-Encoding '" + te +
                       "' is not supported; send the body with Content-Length or chunked");
  }
  const bool has_length = req.has_header("Content-Length");
  if (chunked && has_length) {
    return Framing(400, "invalid_framing",
                   "a request may not carry both Content-Length and Transfer-Encoding");
  }
  uint64_t length = 0;
  if (has_length) {
    const std::string text = req.get_header_value("Content-Length");
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      return Framing(ec == std::errc::result_out_of_range ? 413 : 400,
                     ec == std::errc::result_out_of_range ? "body_too_large" : "invalid_framing",
                     "Content-Length '" + text + "' is not a byte count the server accepts");
    }
  }
  const std::string encoding = Lower(TrimOws(req.get_header_value("Content-Encoding")));
  if (!encoding.empty() && encoding != "identity") {
    return Framing(415, "unsupported_content_encoding",
                   "Content-Encoding '" + encoding +
                       "' is not accepted (a compressed body could inflate past the body "
                       "limit); send it uncompressed");
  }
  if (!IsBodyMethod(req.method)) {
    if (chunked || length > 0) {
      return Framing(400, "invalid_framing", "a " + req.method + " request carries no body");
    }
    return std::nullopt;
  }
  if (!chunked && !has_length) {
    // A request with neither header has no body (RFC 9112 6.3). POST/PUT/PATCH must say
    // so; a DELETE without one is the usual case (DELETE /v1/responses/{id}, as the SDKs
    // and httplib send it).
    if (req.method == "DELETE") return std::nullopt;
    return Framing(
        411, "length_required",
        "a " + req.method + " body needs a Content-Length header or chunked transfer encoding");
  }
  if (length > max_body_bytes) {
    return Framing(413, "body_too_large",
                   "the request body has " + std::to_string(length) + " bytes; the limit is " +
                       std::to_string(max_body_bytes) + " (--max-body-bytes)");
  }
  return std::nullopt;
}

}  // namespace trace::recorder
