// Who may talk to the recorder's server and what a request head may announce, decided on
// the head alone, before any body is read (the frontend runs these in httplib's
// pre-routing handler, so every route, present or added later, is covered):
//
//  - Host: loopback names only (localhost, 127.0.0.0/8, ::1) plus the name the server was
//    told to listen on (--host); any Host when it listens on a wildcard address. A web page
//    that rebinds its own DNS name to 127.0.0.1 sends its own name and is refused.
//  - Origin / Sec-Fetch-Site: a browser's cross-site request is refused unless its Origin
//    was allowed (--allowed-origin); agents (SDKs, curl) send neither header.
//  - The API key: "Authorization: Bearer KEY" or "x-api-key: KEY" (Anthropic's SDKs),
//    compared in constant time.
//  - Body framing: a body only on POST/PUT/PATCH/DELETE, announced by Content-Length (at
//    most the body limit) or chunked transfer (capped while read), never both, never
//    compressed (a small gzip body can inflate without bound).
//
// Ownership: values. Thread safety: reentrant. Errors: each check returns the ApiError to
// answer (status, code, one line naming the header and what to do), or nothing.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recorder/api/model_call.h"

namespace trace::recorder {

// The Host header's name (port and brackets removed, lower case, no trailing dot).
std::string HostName(std::string_view host_header);
// Whether a request with this Host header (empty: none sent) may be served by a server
// listening on `listen_host`.
bool HostAllowed(std::string_view host_header, std::string_view listen_host);
// Whether a browser's Origin is allowed ("*" in `allowed` allows any).
bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed);

// 403 forbidden_host / forbidden_origin, or nothing.
std::optional<ApiError> CheckHost(const httplib::Request& req, std::string_view listen_host);
std::optional<ApiError> CheckOrigin(const httplib::Request& req,
                                    const std::vector<std::string>& allowed_origins);

// The key the request presents: the Bearer token, else x-api-key; empty if none.
std::string PresentedKey(const httplib::Request& req);
// a == b, in time that depends on neither value (both are hashed first).
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// 401 invalid_api_key, or nothing (also when `api_key` is empty: no check).
std::optional<ApiError> CheckApiKey(const httplib::Request& req, const std::string& api_key);

// Whether the head announces a body (Content-Length > 0 or chunked).
bool AnnouncesBody(const httplib::Request& req);
// 400 / 411 / 413 / 415 for a head whose body may not be read, or nothing.
std::optional<ApiError> CheckBodyFraming(const httplib::Request& req, size_t max_body_bytes);

}  // namespace trace::recorder
