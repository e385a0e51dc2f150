// The connection layer of the recorder's HTTP server: what Debian's cpp-httplib (0.11.4, a
// compiled library) lacks so that slow or hostile clients cannot starve the server, built
// around it. httplib 0.11.4 has only per-read timeouts (a client sending one byte every 3 s
// never trips its 5 s read timeout), a fixed thread pool with an unbounded queue (80 silent
// connections block every request, GET /health included), no limit on the size of a
// request head, and a body limit that covers Content-Length only and then reads and
// discards the whole oversized body. So GuardedHttpServer overrides httplib's (virtual)
// per-connection function and runs its own keep-alive loop over its own Stream, calling
// httplib's process_request for each request; parsing, routing, handlers and responses
// stay httplib's. It adds:
//
//  - A connection cap (`max_connections`, one thread each, started on demand). At the cap
//    the connection that has waited longest without a complete request head (a partial
//    head first, then an idle keep-alive one) is closed to make room, so slow clients can
//    never lock out a new one; only when every connection is inside a request is a new
//    one refused at once with a 503 (never queued).
//  - A header timeout: a request head must arrive whole within `header_timeout` of its
//    first byte (else 408 and close), and be at most `max_head_bytes` (else 431).
//  - A keep-alive idle timeout, and prompt wake-up of idle connections on stop.
//  - Connection::ReadBody for the pre-routing handler: reads the body the head announces
//    (Content-Length or chunked, decoded with a size cap) within `read_timeout`, before
//    any route runs; httplib then reads the same bytes again from memory.
//
// Ownership: the server owns its connections; a Connection lives on the thread serving it
// and is reachable there through CurrentConnection() (in httplib's handlers). Thread
// safety: Connection methods are for its own thread; stats() and BeginStop() for any
// thread. Errors: a connection that breaks a limit is answered (408/431/503, connection
// closed) and counted in stats(); nothing throws.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>

namespace trace::recorder {

struct ConnectionLimits {
  int max_connections = 256;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds read_timeout{30'000};  // a request body, from the end of its head
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{5'000};  // one blocked write (httplib's default)
  size_t max_head_bytes = 64 * 1024;
};

struct ConnectionStats {
  uint64_t accepted = 0;
  uint64_t refused = 0;     // 503 at the cap, every connection busy with a request
  uint64_t evicted = 0;     // closed at the cap to make room (no complete request head)
  uint64_t timed_out = 0;   // 408: a head or body that did not arrive in time
  uint64_t bytes_read = 0;  // from client sockets, heads and bodies
};

class GuardedHttpServer;

// One accepted socket: the httplib::Stream its requests are parsed from and answered on.
class Connection final : public httplib::Stream {
 public:
  enum class Phase { kIdle, kHead, kRequest };
  enum class BodyResult { kOk, kTooLarge, kTimedOut, kMalformed, kClosed };

  Connection(int fd, GuardedHttpServer* server);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The head is complete and a request begins: the connection is no longer evictable.
  // False when it was evicted meanwhile (its socket is already shut down).
  bool BeginRequest();
  // Reads the body `req`'s head announces (Content-Length, or chunked decoded, at most
  // `max_bytes` either way) within the read timeout, without consuming it: httplib reads
  // the same bytes afterwards. *body views the decoded body until the next read.
  BodyResult ReadBody(const httplib::Request& req, size_t max_bytes, std::string_view* body);
  // Frees the decoded copy of a chunked body (ReadBody's *body no longer valid); the raw
  // bytes stay buffered for httplib.
  void ReleaseDecodedBody() { std::string().swap(chunked_); }
  // Close after this response (its request may not have been read whole): the response
  // gets "Connection: close" and unread bytes are drained for a bounded time and amount,
  // so the client sees the response rather than a reset.
  void CloseAfterResponse() { close_after_response_ = true; }
  bool close_after_response() const { return close_after_response_; }

  // httplib::Stream.
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return fd_; }

 private:
  friend class GuardedHttpServer;
  friend class ConnectionRegistry;
  enum class Fill { kOk, kEof, kTimedOut, kError };
  using Clock = std::chrono::steady_clock;

  // Waits (keep-alive timeout) for the first byte of the next request. False when the
  // connection ended, idled out, was evicted or the server is stopping.
  bool WaitForRequest();
  // One recv() of up to `want` bytes into the buffer, waiting until `deadline`.
  Fill ReceiveSome(Clock::time_point deadline, size_t want);
  // Until at least `n` unconsumed bytes are buffered.
  Fill FillTo(size_t n, Clock::time_point deadline);
  // The chunked body starting at the read position: decoded into chunked_, raw extent
  // left buffered.
  BodyResult ReadChunked(size_t max_bytes);
  // One pass over the chunked body at the read position, reading what is not buffered yet:
  // checks its framing and the cap, sets *total to its decoded size, appends the decoded
  // bytes to *out unless null.
  BodyResult WalkChunks(size_t max_bytes, std::string* out, size_t* total);
  // Answers `status` with an OpenAI-style error itself (httplib never learns why its read
  // failed), then fails every later read and write.
  void Fail(int status, const std::string& code, const std::string& message);
  // Shuts down and closes the socket; after CloseAfterResponse, drains first.
  void Close();

  const int fd_;
  GuardedHttpServer* const server_;
  std::string in_;  // received bytes; [pos_, size) not yet consumed
  size_t pos_ = 0;
  std::string chunked_;  // the last chunked body, decoded
  Clock::time_point head_deadline_{};
  Clock::time_point body_deadline_{};
  size_t head_bytes_ = 0;
  bool failed_ = false;
  bool close_after_response_ = false;
  // Guarded by the registry's mutex (eviction runs on the listening thread).
  Phase phase_ = Phase::kIdle;
  Clock::time_point phase_since_{};
  bool evicted_ = false;
};

// The Connection the calling thread serves, null outside one.
Connection* CurrentConnection();

// Admitted connections: the cap, eviction, phases.
class ConnectionRegistry {
 public:
  // Makes room for one more connection: true when under the cap or another connection
  // was evicted to make room; false: refuse it.
  bool Admit(int max_connections);
  void Release();
  void Add(Connection* c);
  void Remove(Connection* c);
  // False when `c` was evicted.
  bool SetPhase(Connection* c, Connection::Phase phase);
  uint64_t evicted() const { return evicted_count_; }

 private:
  // guards: admitted_, connections_, and each registered Connection's phase_,
  // phase_since_ and evicted_
  std::mutex mu_;
  std::condition_variable changed_;  // a connection started, ended or was released
  int admitted_ = 0;                 // queued or being served
  std::list<Connection*> connections_;
  std::atomic<uint64_t> evicted_count_{0};
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits limits = {});
  ~GuardedHttpServer() override;

  // Wakes every connection waiting for a request so that stop() returns once the requests
  // in progress are answered. Call before stop().
  void BeginStop();
  // Undoes BeginStop for a later listen.
  void ResetStop();
  ConnectionStats stats() const;
  const ConnectionLimits& limits() const { return limits_; }

 private:
  friend class Connection;
  friend class ConnectionPool;
  bool process_and_close_socket(socket_t sock) override;
  // Over the cap with every connection busy: a 503 without reading anything.
  void Refuse(int sock);

  ConnectionLimits limits_;
  ConnectionRegistry registry_;
  int stop_fd_ = -1;  // eventfd, readable once stopping
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> timed_out_{0};
  std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace trace::recorder
