#include "exporters/url.h"

#include <cctype>

#include "base/escape.h"

namespace trace::exporters {

std::string HttpUrl::Origin() const {
  bool v6 = host.find(':') != std::string::npos;
  return scheme + "://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("URL '" + EscapeForDisplay(url) + "': " + why);
  };
  HttpUrl out;
  size_t colon = url.find("://");
  if (colon == std::string_view::npos) return bad("expected http://HOST[:PORT][/PATH]");
  for (char c : url.substr(0, colon)) {
    out.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (out.scheme != "http" && out.scheme != "https") {
    return bad("scheme must be http or https, not '" + EscapeForDisplay(out.scheme) + "'");
  }
  std::string_view rest = url.substr(colon + 3);
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  out.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (out.path[0] == '?') out.path = "/" + out.path;
  if (authority.find('@') != std::string_view::npos) {
    return bad("user info is not supported; pass credentials with --otlp-header");
  }
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 address");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("unexpected text after the IPv6 address");
      port_text = after.substr(1);
    }
  } else {
    size_t c = authority.rfind(':');
    out.host = std::string(authority.substr(0, c));
    if (c != std::string_view::npos) port_text = authority.substr(c + 1);
  }
  if (out.host.empty()) return bad("no host");
  // The host goes back into a URL (Origin) and into the Host header: an IPv6 address in
  // brackets holds only hex digits, ':' and '.'; a name or IPv4 address only RFC 3986's
  // unreserved characters (a '%' escape, a bracket or a control byte here is a typo).
  const bool v6 = !authority.empty() && authority[0] == '[';
  for (char ch : out.host) {
    const auto c = static_cast<unsigned char>(ch);
    const bool ok = v6 ? std::isxdigit(c) || c == ':' || c == '.'
                       : std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
    if (!ok) {
      return bad(v6 ? "the address in brackets is not an IPv6 address"
                    : "host '" + EscapeForDisplay(out.host) + "' is not a host name or IP address");
    }
  }
  if (v6 && out.host.find(':') == std::string::npos) {
    return bad("the address in brackets is not an IPv6 address");
  }
  if (port_text.empty()) {
    out.port = out.scheme == "https" ? 443 : 80;
  } else {
    int port = 0;
    for (char ch : port_text) {
      if (!std::isdigit(static_cast<unsigned char>(ch)) || port > 65535) {
        return bad("port '" + EscapeForDisplay(port_text) + "' is not a number from 1 to 65535");
      }
      port = port * 10 + (ch - '0');
    }
    if (port < 1 || port > 65535) {
      return bad("port '" + EscapeForDisplay(port_text) + "' is not a number from 1 to 65535");
    }
    out.port = port;
  }
  return out;
}

}  // namespace trace::exporters
