#include "store/store_location.h"

#include <cctype>

namespace trace::store {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "scheme://": letters, digits, '+', '-', '.' before "://", starting with a letter.
std::string_view SchemeOf(std::string_view s) {
  const size_t colon = s.find("://");
  if (colon == std::string_view::npos || colon == 0) return {};
  if (!std::isalpha(static_cast<unsigned char>(s[0]))) return {};
  for (size_t i = 0; i < colon; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return {};
  }
  return s.substr(0, colon);
}

// The URL without a password in its user info or its query (password=...).
std::string WithoutPassword(std::string_view url) {
  std::string out(url);
  const size_t start = out.find("://") + 3;
  const size_t end = out.find_first_of("/?", start);
  const size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
  if (at != std::string::npos && at > start) {
    const size_t colon = out.find(':', start);
    if (colon != std::string::npos && colon < at) out.erase(colon, at - colon);
  }
  const size_t query = out.find('?');
  if (query != std::string::npos) {
    size_t p = out.find("password=", query);
    while (p != std::string::npos) {
      if (out[p - 1] == '?' || out[p - 1] == '&') {
        size_t stop = out.find('&', p);
        out.replace(p, (stop == std::string::npos ? out.size() : stop) - p, "password=***");
      }
      p = out.find("password=", p + 1);
    }
  }
  return out;
}

}  // namespace

bool IsPostgresUrl(std::string_view location) {
  return StartsWith(location, "postgresql://") || StartsWith(location, "postgres://");
}

Result<StoreLocation> ParseStoreLocation(std::string_view location) {
  if (location.empty()) return InvalidArgument("empty store location");
  StoreLocation out;
  const std::string_view scheme = SchemeOf(location);
  if (scheme.empty()) {
    out.target = std::string(location);
    out.display = out.target;
    return out;
  }
  if (scheme == "sqlite") {
    out.target = std::string(location.substr(9));
    if (out.target.empty()) {
      return InvalidArgument("store '" + std::string(location) + "': sqlite:// needs a file path");
    }
    out.display = out.target;
    return out;
  }
  if (scheme == "postgresql" || scheme == "postgres") {
    out.backend = StoreBackend::kPostgres;
    out.target = std::string(location);
    out.display = WithoutPassword(location);
    return out;
  }
  return InvalidArgument("store '" + std::string(location) + "': unknown scheme '" +
                         std::string(scheme) +
                         "://' (a file path, sqlite://PATH or postgresql://USER@HOST/DB)");
}

}  // namespace trace::store
