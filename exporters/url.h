// A minimal http(s) URL parser for the OTLP endpoint and for server.address/server.port.
//
// Ownership: value types. Thread safety: reentrant. Errors: ParseHttpUrl returns
// InvalidArgument naming the URL and what is wrong with it.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace trace::exporters {

struct HttpUrl {
  std::string scheme;  // "http" | "https"
  std::string host;    // without brackets for IPv6 literals
  int port = 0;        // explicit, else 80 / 443
  std::string path;    // "/" when absent; query kept
  // "scheme://host:port" (IPv6 hosts bracketed), what an HTTP client connects to.
  std::string Origin() const;
};

// Accepts http:// and https:// URLs with an optional port and path; no user info.
Result<HttpUrl> ParseHttpUrl(std::string_view url);

}  // namespace trace::exporters
