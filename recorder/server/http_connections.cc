#include "recorder/server/http_connections.h"

#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "recorder/api/model_call.h"

namespace trace::recorder {
namespace {

thread_local Connection* t_current = nullptr;
// Set while the listening thread runs a connection it refuses (httplib hands the task
// queue a closure, not the socket).
thread_local bool t_refusing = false;

constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kMaxReadChunk = 1 << 20;
// After a response to a request that was not read whole: how much of the rest is read and
// dropped, and for how long, before the socket is closed (a close with unread data sends a
// reset, which can destroy the response before the client reads it).
constexpr size_t kMaxDrainBytes = 256 * 1024;
constexpr std::chrono::milliseconds kDrainTime{1000};
constexpr size_t kMaxChunkLine = 1024;
// The most room a chunked body's buffer is given at once (WalkChunks), framing aside.
constexpr size_t kMaxChunkedRoom = size_t{256} << 20;
// How long the listening thread waits, at the cap, for connections that are starting or
// ending to settle before it refuses a new one.
constexpr std::chrono::seconds kEvictionWait{2};
// At the cap, how many evictions may be under way at once (their threads still ending).
int EvictionSlack(int max_connections) {
  return max_connections / 4 + 4;
}

// Milliseconds until `deadline`, rounded up (poll would otherwise wake early and spin).
int MsUntil(std::chrono::steady_clock::time_point deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

void IpAndPort(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return;
  }
  char host[NI_MAXHOST] = {0};
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, nullptr, 0,
                  NI_NUMERICHOST) == 0) {
    ip = host;
  }
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// A whole HTTP response with an OpenAI-style error body, for the answers the connection
// layer gives itself.
std::string RawErrorResponse(int status, const std::string& code, const std::string& message) {
  ApiError e;
  e.http_status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.code = code;
  e.message = message;
  std::string body = e.Body();
  return "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) +
         "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

Connection* CurrentConnection() {
  return t_current;
}

// ---------------------------------------------------------------------------------------
// The task queue httplib's listening loop hands every accepted connection to: one thread
// per admitted connection, started on demand and reused; a refused connection is answered
// on the listening thread itself, so nothing ever waits in a queue behind slow clients.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(GuardedHttpServer* server) : server_(server) {}
  ~ConnectionPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    if (!server_->registry_.Admit(server_->limits_.max_connections)) {
      t_refusing = true;
      fn();
      t_refusing = false;
      return;
    }
    ++server_->accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > idle_) threads_.emplace_back([this] { Work(); });
    cv_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
      --idle_;
      if (jobs_.empty()) return;  // shutting down
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      server_->registry_.Release();
      lock.lock();
    }
  }

  GuardedHttpServer* server_;
  std::mutex mu_;               // guards: jobs_, idle_, shutdown_
  std::condition_variable cv_;  // a job queued or shutdown_ set
  std::deque<std::function<void()>> jobs_;
  size_t idle_ = 0;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------------------
bool ConnectionRegistry::Admit(int max_connections) {
  std::unique_lock<std::mutex> lock(mu_);
  const int hard_cap = max_connections + EvictionSlack(max_connections);
  const auto deadline = std::chrono::steady_clock::now() + kEvictionWait;
  for (;;) {
    if (admitted_ < max_connections) {
      ++admitted_;
      return true;
    }
    // Evict the connection that has waited longest without a complete head: partial heads
    // (the slow clients) before idle keep-alive ones.
    Connection* victim = nullptr;
    bool ending = false;  // evicted connections whose threads are still returning
    for (Connection* c : connections_) {
      ending = ending || c->evicted_;
      if (c->evicted_ || c->phase_ == Connection::Phase::kRequest) continue;
      auto rank = [](const Connection* x) {
        return std::make_pair(x->phase_ == Connection::Phase::kHead ? 0 : 1, x->phase_since_);
      };
      if (victim == nullptr || rank(c) < rank(victim)) victim = c;
    }
    if (victim != nullptr && admitted_ < hard_cap) {
      victim->evicted_ = true;
      // Wakes its thread (EOF); the thread removes it from the registry before closing the
      // fd, so this never touches a descriptor that was reused.
      ::shutdown(victim->fd_, SHUT_RDWR);
      ++evicted_count_;
      ++admitted_;
      return true;
    }
    // Connections admitted but not yet started, or evicted and still ending, change the
    // picture within moments: wait for them rather than refuse. Otherwise every connection
    // is inside a request.
    const bool starting = admitted_ > static_cast<int>(connections_.size());
    if (!starting && !ending && victim == nullptr) return false;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) return false;
  }
}

void ConnectionRegistry::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --admitted_;
  }
  changed_.notify_all();
}

void ConnectionRegistry::Add(Connection* c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    c->phase_since_ = std::chrono::steady_clock::now();
    connections_.push_back(c);
  }
  changed_.notify_all();
}

void ConnectionRegistry::Remove(Connection* c) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_.remove(c);
}

bool ConnectionRegistry::SetPhase(Connection* c, Connection::Phase phase) {
  std::lock_guard<std::mutex> lock(mu_);
  if (c->phase_ != phase) {
    c->phase_ = phase;
    c->phase_since_ = std::chrono::steady_clock::now();
  }
  return !c->evicted_;
}

// ---------------------------------------------------------------------------------------
Connection::Connection(int fd, GuardedHttpServer* server) : fd_(fd), server_(server) {}

Connection::~Connection() = default;

bool Connection::BeginRequest() {
  body_deadline_ = Clock::now() + server_->limits_.read_timeout;
  return server_->registry_.SetPhase(this, Phase::kRequest);
}

bool Connection::WaitForRequest() {
  if (!server_->registry_.SetPhase(this, Phase::kIdle)) return false;
  if (pos_ == in_.size()) {
    Fill f = ReceiveSome(Clock::now() + server_->limits_.keep_alive_timeout, kReadChunk);
    if (f != Fill::kOk) return false;
  }
  if (!server_->registry_.SetPhase(this, Phase::kHead)) return false;
  head_deadline_ = Clock::now() + server_->limits_.header_timeout;
  body_deadline_ = head_deadline_;
  head_bytes_ = 0;
  return true;
}

Connection::Fill Connection::ReceiveSome(Clock::time_point deadline, size_t want) {
  if (pos_ == in_.size()) {
    in_.clear();
    pos_ = 0;
  }
  for (;;) {
    if (Clock::now() >= deadline) return Fill::kTimedOut;
    pollfd fds[2] = {{fd_, POLLIN, 0}, {server_->stop_fd_, POLLIN, 0}};
    int r = ::poll(fds, 2, MsUntil(deadline));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Fill::kError;
    }
    if (r == 0) continue;
    if (fds[1].revents != 0) return Fill::kError;  // the server is stopping
    if (fds[0].revents == 0) continue;
    const size_t chunk = std::clamp(want, kReadChunk, kMaxReadChunk);
    const size_t old = in_.size();
    in_.resize(old + chunk);
    ssize_t n = ::recv(fd_, in_.data() + old, chunk, MSG_DONTWAIT);
    if (n > 0) {
      in_.resize(old + static_cast<size_t>(n));
      server_->bytes_read_ += static_cast<uint64_t>(n);
      return Fill::kOk;
    }
    in_.resize(old);
    if (n == 0) return Fill::kEof;
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return Fill::kError;
  }
}

Connection::Fill Connection::FillTo(size_t n, Clock::time_point deadline) {
  while (in_.size() - pos_ < n) {
    Fill f = ReceiveSome(deadline, n - (in_.size() - pos_));
    if (f != Fill::kOk) return f;
  }
  return Fill::kOk;
}

bool Connection::is_readable() const {
  if (pos_ < in_.size()) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool Connection::is_writable() const {
  if (failed_) return false;
  pollfd out{fd_, POLLOUT, 0};
  if (::poll(&out, 1, static_cast<int>(server_->limits_.write_timeout.count())) <= 0 ||
      (out.revents & POLLOUT) == 0) {
    return false;
  }
  // Alive unless the peer closed its end (as httplib's SocketStream decides): a stream
  // whose client went away stops at its next write.
  pollfd in{fd_, POLLIN, 0};
  if (::poll(&in, 1, 0) == 0) return true;
  char byte;
  return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

ssize_t Connection::read(char* ptr, size_t size) {
  if (failed_) return -1;
  if (pos_ == in_.size()) {
    const bool head = phase_ == Phase::kHead;
    Fill f = ReceiveSome(head ? head_deadline_ : body_deadline_, kReadChunk);
    if (f == Fill::kEof) return 0;
    if (f == Fill::kTimedOut) {
      ++server_->timed_out_;
      if (head) {
        Fail(408, "header_timeout",
             "the request head did not arrive within " +
                 std::to_string(server_->limits_.header_timeout.count()) + " ms");
      } else {
        Fail(408, "read_timeout",
             "the request body did not arrive within " +
                 std::to_string(server_->limits_.read_timeout.count()) + " ms");
      }
      return -1;
    }
    if (f != Fill::kOk) return -1;
  }
  const size_t n = std::min(size, in_.size() - pos_);
  std::memcpy(ptr, in_.data() + pos_, n);
  pos_ += n;
  if (phase_ == Phase::kHead) {
    head_bytes_ += n;
    if (head_bytes_ > server_->limits_.max_head_bytes) {
      Fail(
          431, "head_too_large",
          "the request head exceeds " + std::to_string(server_->limits_.max_head_bytes) + " bytes");
      return -1;
    }
  }
  if (pos_ == in_.size()) {
    // Let go of a large body's buffer once it has been consumed.
    if (in_.capacity() > kMaxReadChunk) {
      std::string().swap(in_);
    } else {
      in_.clear();
    }
    pos_ = 0;
  }
  return static_cast<ssize_t>(n);
}

ssize_t Connection::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  const Clock::time_point deadline = Clock::now() + server_->limits_.write_timeout;
  for (;;) {
    ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    pollfd out{fd_, POLLOUT, 0};
    if (::poll(&out, 1, MsUntil(deadline)) <= 0) return -1;
  }
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const {
  IpAndPort(fd_, /*peer=*/true, ip, port);
}

void Connection::get_local_ip_and_port(std::string& ip, int& port) const {
  IpAndPort(fd_, /*peer=*/false, ip, port);
}

void Connection::Fail(int status, const std::string& code, const std::string& message) {
  if (failed_) return;
  std::string response = RawErrorResponse(status, code, message);
  (void)::send(fd_, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  failed_ = true;
  close_after_response_ = true;
}

Connection::BodyResult Connection::ReadBody(const httplib::Request& req, size_t max_bytes,
                                            std::string_view* body) {
  body_deadline_ = Clock::now() + server_->limits_.read_timeout;
  *body = {};
  auto from_fill = [this](Fill f) {
    if (f == Fill::kTimedOut) {
      ++server_->timed_out_;
      return BodyResult::kTimedOut;
    }
    return BodyResult::kClosed;
  };
  if (strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0) {
    BodyResult r = ReadChunked(max_bytes);
    if (r == BodyResult::kTimedOut) ++server_->timed_out_;
    if (r == BodyResult::kOk) *body = chunked_;
    return r;
  }
  if (!req.has_header("Content-Length")) return BodyResult::kOk;
  const std::string text = req.get_header_value("Content-Length");
  uint64_t length = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
  if (ec != std::errc() || end != text.data() + text.size()) return BodyResult::kMalformed;
  if (length > max_bytes) return BodyResult::kTooLarge;
  in_.reserve(pos_ + static_cast<size_t>(length));  // one allocation, not a doubling series
  Fill f = FillTo(static_cast<size_t>(length), body_deadline_);
  if (f != Fill::kOk) return from_fill(f);
  *body = std::string_view(in_.data() + pos_, static_cast<size_t>(length));
  return BodyResult::kOk;
}

Connection::BodyResult Connection::ReadChunked(size_t max_bytes) {
  // Twice over the raw bytes: the first pass reads and checks them and adds up the size,
  // the second (everything buffered by then) copies into one allocation of that size. One
  // pass appending as chunks came let the decoded copy double as it grew, and with the raw
  // buffer doubling too a 32 MiB body peaked at three times its size.
  std::string().swap(chunked_);
  size_t total = 0;
  if (BodyResult r = WalkChunks(max_bytes, nullptr, &total); r != BodyResult::kOk) return r;
  chunked_.reserve(total);
  return WalkChunks(max_bytes, &chunked_, &total);
}

Connection::BodyResult Connection::WalkChunks(size_t max_bytes, std::string* out, size_t* total) {
  *total = 0;
  size_t cur = 0;  // parse position, relative to pos_ (nothing is consumed)
  // A large chunked body gets room for the largest one at once (its framing included, up
  // to an eighth more; at most 288 MiB), as Content-Length gets. Growing by doubling left
  // every smaller buffer behind in the allocator's heap: a 32 MiB body held twice its size
  // in them. Untouched, the room costs address space, not memory.
  const size_t largest = std::min(max_bytes, kMaxChunkedRoom);
  const size_t room = largest + largest / 8;
  auto fill = [&](size_t n) -> BodyResult {
    if (n > kMaxReadChunk && in_.capacity() < pos_ + room) in_.reserve(pos_ + room);
    Fill f = FillTo(n, body_deadline_);
    if (f == Fill::kOk) return BodyResult::kOk;
    return f == Fill::kTimedOut ? BodyResult::kTimedOut : BodyResult::kClosed;
  };
  // The next CRLF-terminated line; the view lasts until the next fill.
  auto line = [&](std::string_view* out) -> BodyResult {
    for (;;) {
      const size_t avail = in_.size() - pos_;
      const char* base = in_.data() + pos_;
      const void* nl = std::memchr(base + cur, '\n', avail - cur);
      if (nl != nullptr) {
        const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - base) + 1;
        *out = std::string_view(base + cur, end - cur);
        cur = end;
        return out->size() >= 2 && (*out)[out->size() - 2] == '\r' ? BodyResult::kOk
                                                                   : BodyResult::kMalformed;
      }
      if (avail - cur > kMaxChunkLine) return BodyResult::kMalformed;
      if (BodyResult r = fill(avail + 1); r != BodyResult::kOk) return r;
    }
  };
  for (;;) {
    std::string_view l;
    if (BodyResult r = line(&l); r != BodyResult::kOk) return r;
    uint64_t size = 0;
    size_t i = 0;
    for (; i < l.size() && std::isxdigit(static_cast<unsigned char>(l[i])); ++i) {
      if (size > (UINT64_MAX >> 4)) return BodyResult::kMalformed;
      const char c = l[i];
      size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (i == 0) return BodyResult::kMalformed;
    // Optional whitespace and chunk extensions (ignored, as httplib ignores them).
    if (l[i] != '\r' && l[i] != ';' && l[i] != ' ' && l[i] != '\t') return BodyResult::kMalformed;
    if (size == 0) break;
    if (size > max_bytes - *total) return BodyResult::kTooLarge;
    if (BodyResult r = fill(cur + static_cast<size_t>(size) + 2); r != BodyResult::kOk) return r;
    const char* data = in_.data() + pos_ + cur;
    if (data[size] != '\r' || data[size + 1] != '\n') return BodyResult::kMalformed;
    if (out != nullptr) out->append(data, static_cast<size_t>(size));
    *total += static_cast<size_t>(size);
    cur += static_cast<size_t>(size) + 2;
  }
  // No trailers (httplib reads none either): the last chunk is followed by an empty line.
  std::string_view l;
  if (BodyResult r = line(&l); r != BodyResult::kOk) return r;
  return l == "\r\n" ? BodyResult::kOk : BodyResult::kMalformed;
}

void Connection::Close() {
  // Removed from the registry by now, so evicted_ no longer changes.
  if (close_after_response_ && !evicted_) {
    ::shutdown(fd_, SHUT_WR);
    const Clock::time_point deadline = Clock::now() + kDrainTime;
    size_t drained = 0;
    char buf[16 * 1024];
    while (drained < kMaxDrainBytes) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {server_->stop_fd_, POLLIN, 0}};
      int r = ::poll(fds, 2, MsUntil(deadline));
      if (r <= 0 || fds[1].revents != 0) break;
      ssize_t n = ::recv(fd_, buf, std::min(sizeof buf, kMaxDrainBytes - drained), MSG_DONTWAIT);
      if (n <= 0) break;
      drained += static_cast<size_t>(n);
      server_->bytes_read_ += static_cast<uint64_t>(n);
    }
  }
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
}

// ---------------------------------------------------------------------------------------
GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  new_task_queue = [this] { return new ConnectionPool(this); };
  // What the Keep-Alive response header announces.
  set_keep_alive_timeout(std::max<time_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(limits_.keep_alive_timeout).count()));
}

GuardedHttpServer::~GuardedHttpServer() {
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void GuardedHttpServer::BeginStop() {
  uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
}

void GuardedHttpServer::ResetStop() {
  uint64_t value = 0;
  (void)!::read(stop_fd_, &value, sizeof value);  // non-blocking: clears a pending stop
}

ConnectionStats GuardedHttpServer::stats() const {
  ConnectionStats s;
  s.accepted = accepted_;
  s.refused = refused_;
  s.evicted = registry_.evicted();
  s.timed_out = timed_out_;
  s.bytes_read = bytes_read_;
  return s;
}

void GuardedHttpServer::Refuse(int sock) {
  ++refused_;
  const std::string response =
      RawErrorResponse(503, "server_busy",
                       "every one of the server's " + std::to_string(limits_.max_connections) +
                           " connections is busy with a request; retry shortly");
  (void)::send(sock, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  if (t_refusing) {
    Refuse(sock);
    return false;
  }
  Connection conn(sock, this);
  registry_.Add(&conn);
  t_current = &conn;
  bool ret = false;
  size_t remaining = keep_alive_max_count_;
  while (remaining > 0 && svr_sock_ != INVALID_SOCKET) {
    if (!conn.WaitForRequest()) break;
    bool connection_closed = false;
    ret = process_request(conn, /*close_connection=*/remaining == 1, connection_closed, {});
    if (!ret || connection_closed || conn.failed_ || conn.close_after_response_) break;
    --remaining;
  }
  t_current = nullptr;
  registry_.Remove(&conn);
  conn.Close();
  return ret;
}

}  // namespace trace::recorder
