// Fuzz target: the trace event API (POST /trace/v1/events, recorder/server.h) as an agent
// reaches it, over HTTP on loopback: one server (proxy mode, so no model is needed) lives
// for the whole run and every input is one request body. Promises: the server answers
// every request (it neither dies nor hangs), with 200 and {"seqs": [...]} or with a 4xx
// whose body is an OpenAI-style error {"error": {"message": "...", ...}} whose message is
// one printable line.
//
// The client is a few lines of plain sockets rather than httplib::Client: it sends each
// request in one write and ACKs at once (TCP_QUICKACK), because the server writes a
// response's headers and body separately and, with Nagle's algorithm on its sockets, the
// body would otherwise wait out the client's delayed ACK (~40 ms a request).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/server.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using trace::fuzz::Fail;

struct Reply {
  int status = 0;
  std::string body;
  bool close = false;  // the server ends the connection after this reply
};

class Connection {
 public:
  explicit Connection(int port) : port_(port) {}
  ~Connection() { Close(); }

  Reply Post(const std::string& path, const std::string& body) {
    const std::string request = "POST " + path +
                                " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    for (int attempt = 0; attempt < 2; ++attempt) {  // once more if a kept-alive socket closed
      if (fd_ < 0) Connect();
      Reply reply;
      if (SendAll(request) && Receive(&reply)) {
        if (reply.close) Close();
        return reply;
      }
      Close();
    }
    Fail("no answer from the server");
  }

 private:
  // Connects, trying up to 8 fresh sockets. The server ends a connection every 5 requests
  // (httplib's keep-alive count), so at 3,000 inputs a second the client connects 600 times
  // a second and the loopback's 28,232 ephemeral ports come round within a minute, while
  // earlier connections on them may still be in TIME_WAIT: one connect failed after 922,690
  // inputs. Each failed attempt is printed with its errno (the log says how often and why);
  // a server that is gone or stuck fails every attempt, and that is a finding.
  void Connect() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int error = 0;
    for (int attempt = 0; attempt < 8; ++attempt) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      if (fd_ < 0) Fail(std::string("cannot make a socket: ") + std::strerror(errno));
      if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return;
      }
      error = errno;
      std::fprintf(stderr, "event_api_fuzz: connect failed (%s); trying a fresh socket\n",
                   std::strerror(error));
      close(fd_);
      fd_ = -1;
    }
    Fail(std::string("cannot connect to the server: ") + std::strerror(error));
  }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    buffer_.clear();
  }

  bool SendAll(const std::string& data) {
    for (size_t sent = 0; sent < data.size();) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads more bytes into buffer_; false on EOF, error or 60 s of silence (a hang).
  bool ReadMore() {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);  // cleared by the kernel
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 60'000) != 1) return false;
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  bool Receive(Reply* reply) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore()) return false;
    }
    const std::string head = buffer_.substr(0, end);
    if (head.rfind("HTTP/1.1 ", 0) != 0) Fail("not an HTTP reply: " + head);
    reply->status = std::atoi(head.c_str() + 9);
    size_t length = 0;
    bool has_length = false;
    size_t line = head.find("\r\n");
    while (line != std::string::npos) {
      const size_t next = head.find("\r\n", line + 2);
      std::string h = head.substr(line + 2, next == std::string::npos ? next : next - line - 2);
      for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (h.rfind("content-length:", 0) == 0) {
        length = std::strtoull(h.c_str() + 15, nullptr, 10);
        has_length = true;
      } else if (h == "connection: close") {
        reply->close = true;
      }
      line = next;
    }
    if (!has_length) Fail("HTTP reply without Content-Length: " + head);
    while (buffer_.size() < end + 4 + length) {
      if (!ReadMore()) return false;
    }
    reply->body = buffer_.substr(end + 4, length);
    buffer_.erase(0, end + 4 + length);
    return true;
  }

  int port_;
  int fd_ = -1;
  std::string buffer_;
};

Connection& Server() {
  static std::unique_ptr<trace::recorder::Server> server;
  static std::unique_ptr<Connection> connection;
  if (!connection) {
    trace::recorder::ServerOptions options;
    // Nothing listens on the upstream: only /v1 routes would use it.
    auto created = trace::recorder::Server::CreateProxy("http://127.0.0.1:9/v1", options);
    if (!created.ok()) Fail("cannot create the server: " + created.status().message());
    server = std::move(created).value();
    trace::Status st = server->Start();
    if (!st.ok()) Fail("cannot start the server: " + st.message());
    connection = std::make_unique<Connection>(server->port());
  }
  return *connection;
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return {};
}  // tests/fuzz/corpus/ holds them

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const Reply res = Server().Post("/trace/v1/events", body);
  const auto reply = nlohmann::json::parse(res.body, nullptr, false);
  if (res.status == 200) {
    if (!reply.is_object() || !reply.contains("seqs") || !reply["seqs"].is_array()) {
      Fail("200 without seqs: " + res.body);
    }
    return 0;
  }
  if (res.status < 400 || res.status >= 500) {
    Fail("status " + std::to_string(res.status) + ": " + res.body);
  }
  if (!reply.is_object() || !reply.contains("error") || !reply["error"].is_object() ||
      !reply["error"].contains("message") || !reply["error"]["message"].is_string() ||
      reply["error"]["message"].get<std::string>().empty()) {
    Fail("4xx without an OpenAI-style error body: " + res.body);
  }
  // The agent's SDK prints the message on its developer's terminal.
  trace::fuzz::RequireOneLine(reply["error"]["message"].get<std::string>(), "event API error");
  return 0;
}
