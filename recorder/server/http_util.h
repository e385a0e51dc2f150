// Small pieces every part of the recorder's server uses: wall-clock stamps, OpenAI-style
// error replies, random ids, and the listen-backlog fix for Debian's cpp-httplib.
//
// Ownership: plain functions over values. Thread safety: all reentrant. Errors:
// ErrorFromStatus maps a Status to the HTTP status and OpenAI error type a client sees.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/wall_clock.h"
#include "recorder/api/model_call.h"

namespace trace::recorder {

using SteadyClock = std::chrono::steady_clock;

// "2026-11-29T10:00:00.123456Z" for a WallClockNs() value (base/wall_clock.h).
std::string Iso8601(int64_t ns);

// Writes e as the response: its HTTP status and OpenAI error body.
void SendError(httplib::Response& res, const ApiError& e);
// InvalidArgument -> 400, NotFound -> 404, Unavailable -> 503, anything else -> 500.
ApiError ErrorFromStatus(const Status& st);

// `bytes` random bytes from /dev/urandom as lower-case hex.
std::string RandomHex(size_t bytes);

// Debian's compiled cpp-httplib listens with a backlog of 5. A burst of concurrent
// clients (an agent running 16 sessions) then overflows the accept queue while the
// machine is busy, and Linux drops the handshakes' last ACKs: those clients see their
// connection reset ("Read" errors). Calling listen() again on the bound socket raises the
// backlog; the socket is found among our own descriptors by its local port.
void WidenListenBacklog(int port);

}  // namespace trace::recorder
