// The HTTP-limit flags `trace record`, `trace serve` and `trace ui` share (docs/recorder.md,
// "Security"): --max-body-bytes, --max-connections, --header-timeout, --read-timeout and
// --allowed-origin; and the listening flags of `trace serve` and `trace ui` (--host, --port,
// --api-key-file, and --api-key refused). Presentation only: the limits and the key are
// enforced by recorder/server.
//
// Ownership: the flags write into an HttpFlags the command owns. Thread safety: CLI
// parsing is single-threaded. Errors: a value out of range is a Status naming the flag.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "base/status.h"
#include "recorder/secrets.h"
#include "recorder/server.h"

namespace trace::cli {

struct HttpFlags {
  recorder::HttpLimits defaults;
  double max_body_bytes = static_cast<double>(defaults.max_body_bytes);
  int max_connections = defaults.max_connections;
  double header_timeout_s = defaults.header_timeout_ms / 1000.0;
  double read_timeout_s = defaults.read_timeout_ms / 1000.0;
  std::vector<std::string> allowed_origins;
};

inline void AddHttpFlags(CLI::App* cmd, HttpFlags* f) {
  cmd->add_option("--max-body-bytes", f->max_body_bytes,
                  "Largest request body accepted (default 33554432 = 32 MiB); larger ones get\n"
                  "413 before they are read")
      ->type_name("BYTES");
  cmd->add_option("--max-connections", f->max_connections,
                  "Most open client connections (default 256); at the cap the one waiting\n"
                  "longest without a complete request is closed")
      ->type_name("N");
  cmd->add_option("--header-timeout", f->header_timeout_s,
                  "Seconds a request head may take from its first byte (default 10)")
      ->type_name("SECONDS");
  cmd->add_option("--read-timeout", f->read_timeout_s,
                  "Seconds a request body may take after its head (default 30)")
      ->type_name("SECONDS");
  cmd->add_option("--allowed-origin", f->allowed_origins,
                  "Serve browser requests from this web origin, e.g. http://localhost:3000\n"
                  "(repeatable; '*': any). Default: browser requests are refused")
      ->type_name("ORIGIN")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

struct ListenFlags {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string api_key_file;
  std::string api_key_on_command_line;  // refused: `ps` shows it to every user
};

inline void AddListenFlags(CLI::App* cmd, ListenFlags* f, int default_port) {
  f->port = default_port;
  cmd->add_option("--host", f->host,
                  "Address to listen on (default 127.0.0.1). Requests must name a loopback\n"
                  "host or this one in their Host header (0.0.0.0: any)");
  cmd->add_option("--port", f->port,
                  "Port (default " + std::to_string(default_port) + "; 0: a free one)");
  cmd->add_option("--api-key-file", f->api_key_file,
                  "Require 'Authorization: Bearer KEY' (or 'x-api-key: KEY'), KEY being this\n"
                  "file's first line; else $TRACE_API_KEY; neither: no check")
      ->type_name("FILE");
  cmd->add_option("--api-key", f->api_key_on_command_line)->group("");  // refused: ListenKey
}

// The key the server requires ("" for none): --api-key-file, else $TRACE_API_KEY. A key
// given on the command line is refused.
inline Result<std::string> ListenKey(const ListenFlags& f) {
  if (!f.api_key_on_command_line.empty()) {
    return InvalidArgument(
        "--api-key puts the key in `ps` output, shell history and the recorded command line; "
        "use --api-key-file FILE or the TRACE_API_KEY environment variable");
  }
  return recorder::ResolveApiKey(f.api_key_file);
}

inline Result<recorder::HttpLimits> HttpLimitsFrom(const HttpFlags& f) {
  recorder::HttpLimits l;
  if (!(f.max_body_bytes >= 1 && f.max_body_bytes <= 1e12)) {
    return InvalidArgument("--max-body-bytes must be between 1 and 10^12");
  }
  if (f.max_connections < 1 || f.max_connections > 4096) {
    return InvalidArgument("--max-connections must be between 1 and 4096");
  }
  for (double t : {f.header_timeout_s, f.read_timeout_s}) {
    if (!(t >= 0.001 && t <= 86400)) {
      return InvalidArgument(
          "--header-timeout and --read-timeout must be between 0.001 and 86400 s");
    }
  }
  l.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  l.max_connections = f.max_connections;
  l.header_timeout_ms = static_cast<int>(std::lround(f.header_timeout_s * 1000));
  l.read_timeout_ms = static_cast<int>(std::lround(f.read_timeout_s * 1000));
  l.allowed_origins = f.allowed_origins;
  return l;
}

}  // namespace trace::cli
