// End-to-end tests of the recorder's server against hostile and careless clients, over
// real sockets with the demo model: JSON nested 100,000 levels on every JSON route (local
// engine and proxy), oversized bodies (Content-Length and chunked) refused before they are
// read, a wrong key with a 50 MB body not read, 100 slow connections while /health and a
// model call still answer (and the cap evicting them), header/body timeouts, the cap
// refusing only when every connection is busy, an unauthenticated flood counted rather
// than stored, foreign Host and Origin refused (CORS for allowed origins), clock values
// out of range, and a huge prompt refused before it is tokenized.
//
// Synchronisation is by the protocol (a response, "100 Continue"), never by sleeping; the
// waits on sockets have generous fail-safe timeouts that only turn a hang into a failure.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "recorder/api/json_body.h"
#include "recorder/server.h"
#include "recorder/server/call_recording.h"
#include "store/store.h"
#include "tests/recorder/server_fixture.h"

namespace trace::recorder {
namespace {

using namespace testing;  // NOLINT: the fixture
using nlohmann::json;

// A client socket with a fail-safe receive timeout.
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{120, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConn() { Close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // False once the peer is gone.
  bool Send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until `marker` is in what was received (or EOF / the fail-safe timeout).
  std::string ReadUntil(const std::string& marker) {
    while (received_.find(marker) == std::string::npos) {
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }
  // One whole response: status, headers (lower-cased names), body.
  struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
  };
  Response ReadResponse() {
    Response r;
    std::string head = ReadUntil("\r\n\r\n");
    size_t end = head.find("\r\n\r\n");
    if (end == std::string::npos) return r;
    r.status = std::atoi(head.substr(9, 3).c_str());
    size_t line = head.find("\r\n") + 2;
    while (line < end) {
      size_t eol = head.find("\r\n", line);
      std::string h = head.substr(line, eol - line);
      size_t colon = h.find(':');
      std::string name = h.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(c));
      r.headers[name] = h.substr(colon + 2);
      line = eol + 2;
    }
    size_t length = static_cast<size_t>(std::atoll(r.headers["content-length"].c_str()));
    ReadUntilSize(end + 4 + length);
    r.body = received_.substr(end + 4, length);
    received_.erase(0, end + 4 + length);
    return r;
  }

 private:
  void ReadUntilSize(size_t n) {
    while (received_.size() < n) {
      char buf[4096];
      ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
      if (got <= 0) break;
      received_.append(buf, static_cast<size_t>(got));
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

std::string Nested(size_t levels) {
  return std::string(levels, '[') + std::string(levels, ']');
}

std::string NestedObjects(size_t levels) {
  std::string s;
  for (size_t i = 0; i < levels; ++i) s += "{\"a\":";
  s += "1" + std::string(levels, '}');
  return s;
}

std::string Chunked(const std::string& body, size_t piece) {
  std::string out;
  char size[32];
  for (size_t off = 0; off < body.size(); off += piece) {
    const size_t n = std::min(piece, body.size() - off);
    snprintf(size, sizeof size, "%zx\r\n", n);
    out += size + body.substr(off, n) + "\r\n";
  }
  return out + "0\r\n\r\n";
}

httplib::Result Get(Server& s, const std::string& path, httplib::Headers h = {}) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(120, 0);
  return c.Get(path.c_str(), h);
}

httplib::Headers Auth() {
  return {{"Authorization", std::string("Bearer ") + kKey}};
}

std::map<std::string, int> NoteTopics(const std::vector<proto::Event>& events) {
  std::map<std::string, int> n;
  for (const proto::Event& e : events) {
    if (e.has_note()) ++n[e.note().topic()];
  }
  return n;
}

using HostileInputTest = ServerTest;
// Inputs of a million items, handled in linear time. Not HostileInputTest: the sanitizer
// stage runs that suite under TSan, and these exercise no threads, only sizes.
using LargeInputTest = ServerTest;

TEST_F(HostileInputTest, JsonNestedHundredThousandLevelsIsA400OnEveryRoute) {
  RecordedRun rec("deep");
  auto server = StartServer({}, rec.log.get());
  ASSERT_TRUE(server);
  // The proxy's routes too: it forwards to the local server, with its key.
  setenv("TRACE_UPSTREAM_API_KEY", kKey, 1);
  ServerOptions po;
  po.api_key = kKey;
  auto proxy = Server::CreateProxy(server->origin() + "/v1", po);
  ASSERT_TRUE(proxy.ok());
  ASSERT_TRUE((*proxy)->Start().ok());
  const std::string arrays = Nested(100'000);
  const std::vector<std::string> bodies = {
      arrays, NestedObjects(100'000),
      "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"x\": " +
          arrays + "}",
      "{\"type\": \"note\", \"text\": \"t\", \"data\": " + arrays + "}"};
  for (Server* s : {server.get(), proxy->get()}) {
    for (const char* route :
         {"/v1/chat/completions", "/v1/completions", "/trace/v1/events", "/trace/v1/flush"}) {
      for (const std::string& body : bodies) {
        auto r = Post(*s, route, json(body));
        ASSERT_TRUE(r) << route;
        EXPECT_EQ(r->status, 400) << route;
        json err = json::parse(r->body, nullptr, false);
        EXPECT_EQ(err["error"]["code"], "json_too_deep") << route << ": " << r->body;
      }
    }
    // The same as a chunked body.
    RawConn c(s->port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(
        c.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
               "Bearer " +
               std::string(kKey) +
               "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
               Chunked(arrays, 4096)));
    RawConn::Response r = c.ReadResponse();
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("json_too_deep"), std::string::npos) << r.body;
  }
  // Alive and serving: /health, a model call, directly and through the proxy.
  EXPECT_EQ(Get(*server, "/health")->status, 200);
  Chat(*server, {{"messages", Conversation(1)}, {"max_tokens", 2}});
  auto via_proxy =
      Post(**proxy, "/v1/chat/completions",
           {{"model", server->model_name()}, {"messages", Conversation(1)}, {"max_tokens", 2}});
  ASSERT_TRUE(via_proxy);
  EXPECT_EQ(via_proxy->status, 200) << via_proxy->body;
  unsetenv("TRACE_UPSTREAM_API_KEY");
  (*proxy)->Stop();
  server->Stop();
  std::map<std::string, int> notes = NoteTopics(rec.End());
  // Authenticated bad requests are still recorded one by one (4 routes x 4 bodies + chunked).
  EXPECT_EQ(notes["rejected_request"], 17);
}

TEST_F(HostileInputTest, OversizedBodiesAreRefusedBeforeTheyAreRead) {
  ServerOptions o;
  o.limits.max_body_bytes = 1 << 20;
  o.limits.read_timeout_ms = 600'000;  // a server waiting for the body would hang, not 408
  auto server = StartServerWith(o);
  ASSERT_TRUE(server);
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Authorization: Bearer " +
      std::string(kKey) + "\r\nContent-Type: application/json\r\n";
  {
    // Content-Length over the limit: 413 at once, nothing of the body read.
    const uint64_t before = server->http_stats().bytes_read;
    RawConn c(server->port());
    ASSERT_TRUE(c.Send(head + "Content-Length: 50000000\r\n\r\n"));
    RawConn::Response r = c.ReadResponse();
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(r.headers["connection"], "close");
    EXPECT_NE(r.body.find("--max-body-bytes"), std::string::npos) << r.body;
    c.Close();
    EXPECT_LT(server->http_stats().bytes_read - before, 64u * 1024);
  }
  {
    // Chunked: the cap applies while reading; the client cannot push its 64 MiB.
    const uint64_t before = server->http_stats().bytes_read;
    RawConn c(server->port());
    ASSERT_TRUE(c.Send(head + "Transfer-Encoding: chunked\r\n\r\n"));
    std::atomic<uint64_t> sent{0};
    std::thread sender([&] {
      const std::string piece = Chunked(std::string(64 * 1024, ' '), 64 * 1024);
      const std::string chunk = piece.substr(0, piece.size() - 5);  // without the last chunk
      for (int i = 0; i < 1024 && c.Send(chunk); ++i) sent += chunk.size();
    });
    RawConn::Response r = c.ReadResponse();
    sender.join();
    EXPECT_EQ(r.status, 413);
    EXPECT_NE(r.body.find("body_too_large"), std::string::npos) << r.body;
    c.Close();
    EXPECT_LT(sent.load(), 64u << 20);
    EXPECT_LT(server->http_stats().bytes_read - before, 2u << 20);
  }
  {
    // A POST announcing no length would be read until the client closes: 411.
    RawConn c(server->port());
    ASSERT_TRUE(c.Send(head + "\r\n{}"));
    EXPECT_EQ(c.ReadResponse().status, 411);
  }
  // A body of exactly the limit is served.
  json note = {{"type", "note"}, {"text", ""}};
  note["text"] = std::string((1 << 20) - note.dump().size(), 'x');
  ASSERT_EQ(note.dump().size(), size_t{1} << 20);
  auto r = Post(*server, "/trace/v1/events", note);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body.substr(0, 200);
}

TEST_F(HostileInputTest, WrongKeyWithALargeBodyIsNotRead) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const uint64_t before = server->http_stats().bytes_read;
  const size_t kBody = 50'000'000;
  RawConn c(server->port());
  ASSERT_TRUE(
      c.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Authorization: Bearer wrong\r\nContent-Type: application/json\r\n"
             "Content-Length: " +
             std::to_string(kBody) + "\r\n\r\n"));
  std::atomic<uint64_t> sent{0};
  std::thread sender([&] {
    const std::string piece(64 * 1024, ' ');
    while (sent < kBody && c.Send(piece)) sent += piece.size();
  });
  RawConn::Response r = c.ReadResponse();
  sender.join();
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["connection"], "close");
  c.Close();
  // The client could not deliver its body (the server closed after at most a bounded
  // drain), and the server read well under a megabyte of it.
  EXPECT_LT(sent.load(), kBody);
  EXPECT_LT(server->http_stats().bytes_read - before, 1u << 20);
  EXPECT_EQ(server->http_stats().unauthenticated, 1u);
}

// 100 connections that started a request head and send one more byte now and then (the
// attack: each byte arrives well within any per-read timeout) while /health and a model
// call must still be answered. The header timeout is set to 10 minutes so that it is not
// what saves the server. The bytes are sent between the probes rather than on a timer, so
// what the server sees does not depend on the machine's speed.
TEST_F(HostileInputTest, SlowClientsCannotStarveTheServer) {
  for (int cap : {256, 16}) {
    SCOPED_TRACE("max_connections " + std::to_string(cap));
    ServerOptions o;
    o.limits.header_timeout_ms = 600'000;
    o.limits.max_connections = cap;
    auto server = StartServerWith(o);
    ASSERT_TRUE(server);
    std::vector<std::unique_ptr<RawConn>> slow;
    for (int i = 0; i < 100; ++i) {
      slow.push_back(std::make_unique<RawConn>(server->port()));
      ASSERT_TRUE(slow.back()->connected());
      slow.back()->Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
    }
    // The server has taken every slow connection before the probes connect, so that each
    // probe finds the cap already full of slow clients (not a connection still in the
    // kernel's backlog, which would make the counts below depend on scheduling). A wait
    // on the server's state, with a fail-safe deadline that only turns a hang into a failure.
    const auto fail_safe = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (server->http_stats().connections_accepted < 100 &&
           std::chrono::steady_clock::now() < fail_safe) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(server->http_stats().connections_accepted, 100u);
    // One more byte on each (an evicted one's send fails, which is what eviction means).
    auto trickle = [&] {
      for (auto& c : slow) c->Send("a");
    };
    trickle();
    auto health = Get(*server, "/health");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    trickle();
    json reply = Chat(*server, {{"messages", Conversation(2)}, {"max_tokens", 2}});
    EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");
    trickle();
    EXPECT_EQ(Get(*server, "/health")->status, 200);
    HttpStats stats = server->http_stats();
    if (cap == 16) {
      // Every slow connection past the cap, and the probes, made room by evicting one.
      EXPECT_GE(stats.connections_evicted, 100u - 16u + 1u);
      EXPECT_EQ(stats.connections_refused, 0u);
    } else {
      EXPECT_EQ(stats.connections_evicted, 0u);
    }
    slow.clear();
    server->Stop();
  }
}

// A head or body that stops arriving is answered 408 once its timeout passes; the outcome
// does not depend on the timeouts' length (the client sends nothing more), only the
// test's duration does.
TEST_F(HostileInputTest, SlowHeadsAndBodiesTimeOutWith408) {
  ServerOptions o;
  o.limits.header_timeout_ms = 300;
  o.limits.read_timeout_ms = 300;
  auto server = StartServerWith(o);
  ASSERT_TRUE(server);
  {
    RawConn c(server->port());
    ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));  // and nothing more
    RawConn::Response r = c.ReadResponse();
    EXPECT_EQ(r.status, 408);
    EXPECT_NE(r.body.find("header_timeout"), std::string::npos) << r.body;
  }
  {
    RawConn c(server->port());
    ASSERT_TRUE(
        c.Send("POST /trace/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
               std::string(kKey) + "\r\nContent-Length: 100\r\n\r\n{\"type\":"));
    RawConn::Response r = c.ReadResponse();
    EXPECT_EQ(r.status, 408);
    EXPECT_NE(r.body.find("read_timeout"), std::string::npos) << r.body;
  }
  EXPECT_EQ(server->http_stats().timeouts, 2u);
  server->Stop();
}

// A head that never ends (headers without a blank line) is cut at the head limit (64 KiB),
// on its size: the header timeout is 10 minutes so that it cannot be what answers.
TEST_F(HostileInputTest, EndlessHeadIsA431) {
  ServerOptions o;
  o.limits.header_timeout_ms = 600'000;
  auto server = StartServerWith(o);
  ASSERT_TRUE(server);
  RawConn c(server->port());
  std::string endless = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; endless.size() < 70 * 1024; ++i) endless += "X-H" + std::to_string(i) + ": v\r\n";
  c.Send(endless);
  EXPECT_EQ(c.ReadResponse().status, 431);
  EXPECT_EQ(server->http_stats().timeouts, 0u);
  EXPECT_EQ(Get(*server, "/health")->status, 200);
}

TEST_F(HostileInputTest, AtTheCapANewConnectionIsRefusedOnlyWhenAllAreBusy) {
  ServerOptions o;
  o.limits.max_connections = 2;
  o.limits.read_timeout_ms = 600'000;
  auto server = StartServerWith(o);
  ASSERT_TRUE(server);
  std::vector<std::unique_ptr<RawConn>> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(std::make_unique<RawConn>(server->port()));
    ASSERT_TRUE(busy.back()->Send(
        "POST /trace/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
        std::string(kKey) + "\r\nExpect: 100-continue\r\nContent-Length: 40\r\n\r\n"));
    // "100 Continue" comes once the server has admitted the request: it is now busy.
    EXPECT_EQ(busy.back()->ReadResponse().status, 100);
    busy.back()->Send("{\"type\": \"note\",");  // half the body
  }
  auto refused = Get(*server, "/health");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("server_busy"), std::string::npos);
  EXPECT_EQ(server->http_stats().connections_refused, 1u);
  // The busy requests complete normally.
  for (auto& c : busy) {
    c->Send(std::string(40 - 16 - 2, ' ') + "\"}");
  }
  for (auto& c : busy) {
    RawConn::Response r = c->ReadResponse();
    EXPECT_EQ(r.status, 400) << r.body;  // {"type": "note",     "} is not JSON: a real answer
  }
}

TEST_F(HostileInputTest, UnauthenticatedFloodIsCountedNotStored) {
  RecordedRun rec("flood");
  auto server = StartServer({}, rec.log.get());
  ASSERT_TRUE(server);
  const int kFlood = 300;
  for (int i = 0; i < kFlood; ++i) {
    auto r = i % 3 == 0 ? Get(*server, "/v1/models")
                        : Post(*server, i % 3 == 1 ? "/v1/chat/completions" : "/trace/v1/events",
                               json{{"type", "note"}, {"text", "x"}}, "wrong-" + std::to_string(i));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 401);
  }
  Chat(*server, {{"messages", Conversation(1)}, {"max_tokens", 2}});
  EXPECT_EQ(server->http_stats().unauthenticated, static_cast<uint64_t>(kFlood));
  server->Stop();
  std::vector<proto::Event> events = rec.End();
  std::map<std::string, int> notes = NoteTopics(events);
  EXPECT_EQ(notes["refused_requests"], 2);  // the first, and the summary
  EXPECT_EQ(notes["rejected_request"], 0);
  EXPECT_LT(events.size(), 10u);
  std::string summary;
  for (const proto::Event& e : events) {
    if (e.has_note() && e.note().topic() == "refused_requests") summary = e.note().text();
  }
  EXPECT_NE(summary.find("300 requests were refused"), std::string::npos) << summary;
}

TEST_F(HostileInputTest, ForeignHostAndOriginAreRefused) {
  RecordedRun rec("origin");
  ServerOptions o;
  o.limits.allowed_origins = {"http://localhost:5173"};
  auto server = StartServerWith(o, rec.log.get());
  ASSERT_TRUE(server);
  const std::string port = std::to_string(server->port());
  json body = {{"type", "note"}, {"text", "from a page"}};
  auto post = [&](httplib::Headers h) {
    httplib::Client c("127.0.0.1", server->port());
    h.emplace("Authorization", std::string("Bearer ") + kKey);
    return c.Post("/trace/v1/events", h, body.dump(), "application/json");
  };
  // DNS rebinding: the page's own name in Host, even with the right key.
  auto rebound = post({{"Host", "attacker.example:" + port}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403);
  EXPECT_NE(rebound->body.find("forbidden_host"), std::string::npos);
  // CSRF: a page on another origin posting (a simple request carries no key at all).
  auto csrf = post({{"Origin", "https://attacker.example"}});
  ASSERT_TRUE(csrf);
  EXPECT_EQ(csrf->status, 403);
  EXPECT_NE(csrf->body.find("forbidden_origin"), std::string::npos);
  auto no_cors = post({{"Sec-Fetch-Site", "cross-site"}});
  EXPECT_EQ(no_cors->status, 403);
  EXPECT_EQ(Get(*server, "/health", {{"Host", "attacker.example"}})->status, 403);
  // Loopback names and the allowed origin are served; CORS headers for the latter.
  EXPECT_EQ(post({{"Host", "localhost:" + port}})->status, 200);
  EXPECT_EQ(post({{"Host", "[::1]:" + port}})->status, 200);
  auto allowed = post({{"Origin", "http://localhost:5173"}});
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->status, 200);
  EXPECT_EQ(allowed->get_header_value("Access-Control-Allow-Origin"), "http://localhost:5173");
  httplib::Client c("127.0.0.1", server->port());
  auto preflight = c.Options("/v1/chat/completions",
                             {{"Origin", "http://localhost:5173"},
                              {"Access-Control-Request-Method", "POST"},
                              {"Access-Control-Request-Headers", "authorization,content-type"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "http://localhost:5173");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"),
            "authorization,content-type");
  auto foreign_preflight = c.Options("/v1/chat/completions", {{"Origin", "https://evil.example"}});
  EXPECT_EQ(foreign_preflight->status, 403);
  HttpStats stats = server->http_stats();
  EXPECT_EQ(stats.foreign_host, 2u);
  EXPECT_EQ(stats.foreign_origin, 3u);
  server->Stop();
  std::vector<proto::Event> events = rec.End();
  int agent_notes = 0;
  for (const proto::Event& e : events) {
    if (e.has_note() && e.note().topic() == "agent") ++agent_notes;
  }
  EXPECT_EQ(agent_notes, 3);  // only the three admitted posts
  EXPECT_EQ(NoteTopics(events)["refused_requests"], 2);
}

TEST_F(HostileInputTest, ClockValuesOutOfRangeAreA400) {
  RecordedRun rec("clock");
  auto server = StartServer({}, rec.log.get());
  ASSERT_TRUE(server);
  for (const char* bad :
       {R"({"type": "clock", "value_ns": 1e30})", R"({"type": "clock", "value_ns": -1e30})",
        R"({"type": "clock", "value_ns": 18446744073709551615})",
        R"({"events": [{"type": "note", "text": "kept?"},
                                         {"type": "clock", "value_ns": 1e19}]})"}) {
    auto r = Post(*server, "/trace/v1/events", json(std::string(bad)));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_NE(r->body.find("value_ns"), std::string::npos) << r->body;
  }
  auto ok =
      Post(*server, "/trace/v1/events", json{{"type", "clock"}, {"value_ns", 1700000000123456789}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  server->Stop();
  int clocks = 0, notes = 0;
  for (const proto::Event& e : rec.End()) {
    if (e.has_clock_read()) {
      ++clocks;
      EXPECT_EQ(e.clock_read().value_ns(), 1700000000123456789);
    }
    if (e.has_note() && e.note().topic() == "agent") ++notes;
  }
  EXPECT_EQ(clocks, 1);
  EXPECT_EQ(notes, 0);  // the bad batch recorded nothing
}

// A prompt that cannot fit the context is refused on its bytes, before tokenization (which
// for tens of megabytes took seconds and gigabytes).
TEST_F(HostileInputTest, HugePromptIsRefusedBeforeTokenizing) {
  auto tok = engine::Tokenizer::Load(model_dir() + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  size_t longest = 1;
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) {
    longest = std::max(longest, (*tok)->TokenBytes(id).size());
  }
  const size_t context = 8192;  // the demo model's max_position_embeddings
  const size_t bound = 3 * longest * context;
  ServerOptions o;
  o.limits.max_body_bytes = bound + 4096;
  auto server = StartServerWith(o);
  ASSERT_TRUE(server);
  for (bool chat : {false, true}) {
    json body = {{"model", server->model_name()}, {"max_tokens", 1}};
    if (chat) {
      body["messages"] = {{{"role", "user"}, {"content", std::string(bound, 'a')}}};
    } else {
      body["prompt"] = std::string(bound + 1, 'a');
    }
    auto r = Post(*server, chat ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    json err = json::parse(r->body);
    EXPECT_EQ(err["error"]["code"], "context_length_exceeded");
    // Decided on bytes ("the prompt is N bytes"), not on a token count.
    EXPECT_NE(err["error"]["message"].get<std::string>().find(" bytes; the model's context"),
              std::string::npos)
        << err.dump();
  }
}

// A prompt under the byte bound but over the context is encoded only up to the context's
// length (Tokenizer::Encode's cap): the answer says "at least" that many tokens, and the
// count is exactly the context, not the prompt's whole length (about 100,000 tokens here).
TEST_F(HostileInputTest, PromptOverTheContextIsEncodedOnlyToTheContext) {
  auto server = StartServerWith(ServerOptions{});
  ASSERT_TRUE(server);
  std::string words;
  for (int i = 0; i < 100000; ++i) words += " hello";
  json body = {{"model", server->model_name()}, {"max_tokens", 1}, {"prompt", words}};
  auto r = Post(*server, "/v1/completions", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  json err = json::parse(r->body);
  EXPECT_EQ(err["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(err["error"]["message"].get<std::string>(),
            "the prompt has at least 8192 tokens; the model's context is 8192")
      << err.dump();
}

// An object of a million keys (17 MB, inside the body limit) cost nlohmann's ordered parse
// a comparison with every earlier key per key, 5 * 10^11 in all: about 15 minutes of a
// server thread. The template's conversion of tool-call arguments did the same. Both are
// linear now (base/ordered_json.h; tests/base/ordered_json_test.cc parses a million keys).
// The server now refuses a body of more than 250,000 values and keys as soon as it is read,
// counting those of tool-call arguments (json_body.h): a million keys are a 413 naming the
// field, 120,000 (240,000 values and keys) are parsed.
TEST_F(LargeInputTest, AnObjectOfAMillionKeysIsRefusedAndOneOf120000Parsed) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  for (int n : {1'000'000, 120'000}) {
    SCOPED_TRACE(n);
    const bool refused = n > 250'000;
    json keys = json::object();
    for (int i = 0; i < n; ++i) keys["k" + std::to_string(i)] = i;
    // Ignored by the server, parsed with the body.
    auto r = Post(*server, "/v1/chat/completions",
                  {{"model", server->model_name()},
                   {"messages", Conversation(1)},
                   {"max_tokens", 1},
                   {"metadata", keys}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, refused ? 413 : 200) << r->body.substr(0, 300);
    if (refused) {
      json err = json::parse(r->body);
      EXPECT_EQ(err["error"]["code"], "too_many_json_values");
      EXPECT_EQ(err["error"]["param"], "metadata");
    }
    // Tool-call arguments are parsed again and converted for the template, which renders
    // them whole: far past the model's context, so refused on the prompt's bytes.
    json messages = Conversation(1);
    messages.push_back({{"role", "assistant"},
                        {"content", ""},
                        {"tool_calls",
                         {{{"id", "call_1"},
                           {"type", "function"},
                           {"function", {{"name", "f"}, {"arguments", keys.dump()}}}}}}});
    messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "ok"}});
    r = Post(*server, "/v1/chat/completions",
             {{"model", server->model_name()}, {"messages", messages}, {"max_tokens", 1}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, refused ? 413 : 400) << r->body.substr(0, 300);
    EXPECT_EQ(json::parse(r->body)["error"]["code"],
              refused ? "too_many_json_values" : "context_length_exceeded");
  }
  EXPECT_EQ(Get(*server, "/health")->status, 200);
}

// Each tool result is recorded under the name of the call it answers, found by scanning
// every message of the request for each tool message: 300,000 answered calls in one request
// (a long agent conversation sent through the proxy) were 1.8 * 10^11 comparisons, more
// than 10 minutes (18.5 s at 50,000, growing faster than the square; this test timed out).
// Now a map from call id to name.
TEST_F(LargeInputTest, ToolResultsOfALongConversationAreNamedInLinearTime) {
  RecordedRun rec("tool-results");
  constexpr int kCalls = 300'000;
  CompletionRequest req;
  for (int i = 0; i < kCalls; ++i) {
    ChatMessage assistant;
    assistant.role = "assistant";
    ToolCall call;
    call.id = "call_" + std::to_string(i);
    call.name = "f" + std::to_string(i % 7);
    assistant.tool_calls.push_back(std::move(call));
    req.messages.push_back(std::move(assistant));
  }
  for (int i = 0; i < kCalls; ++i) {
    ChatMessage tool;
    tool.role = "tool";
    tool.tool_call_id = "call_" + std::to_string(i);
    tool.content = "r" + std::to_string(i);
    req.messages.push_back(std::move(tool));
  }
  ChatMessage unanswered;  // no call has this id: the message's own name stays
  unanswered.role = "tool";
  unanswered.tool_call_id = "call_x";
  unanswered.name = "own";
  req.messages.push_back(unanswered);
  RecordToolResultsFromMessages(rec.log.get(), req);
  std::map<std::string, std::string> names;
  for (const proto::Event& e : rec.End()) {
    if (e.has_tool_result()) names[e.tool_result().call_id()] = e.tool_result().name();
  }
  ASSERT_EQ(names.size(), static_cast<size_t>(kCalls + 1));
  EXPECT_EQ(names["call_0"], "f0");
  EXPECT_EQ(names["call_123456"], "f" + std::to_string(123456 % 7));
  EXPECT_EQ(names["call_x"], "own");
}

TEST_F(HostileInputTest, KeepAliveAndChunkedBodiesStillWork) {
  ServerOptions o;
  o.limits.keep_alive_timeout_ms = 600'000;  // a stalled machine must not close it between
  auto server = StartServerWith(o);
  ASSERT_TRUE(server);
  httplib::Client c("127.0.0.1", server->port());
  c.set_keep_alive(true);
  c.set_read_timeout(120, 0);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Post("/trace/v1/events", Auth(), json{{"type", "note"}, {"text", "k"}}.dump(),
                    "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(server->http_stats().connections_accepted, 1u);
  RawConn raw(server->port());
  json chat = {{"model", server->model_name()}, {"messages", Conversation(3)}, {"max_tokens", 2}};
  ASSERT_TRUE(raw.Send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
      "Bearer " +
      std::string(kKey) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunked(chat.dump(), 7)));
  RawConn::Response r = raw.ReadResponse();
  EXPECT_EQ(r.status, 200) << r.body;
  // The next request on the same connection (the chunked body was consumed exactly).
  ASSERT_TRUE(raw.Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  EXPECT_EQ(raw.ReadResponse().status, 200);
}

// A refused request that sent "Connection: close" got the header twice: the refusal's and
// httplib's own. Refusals on the head (a wrong key) and after the body (too deep, too many
// values) answer it once, with no Keep-Alive; a route's own 400 and an answered request
// that asked to close get it once too, and keep the connection otherwise.
TEST_F(HostileInputTest, ARefusedRequestThatAsksToCloseGetsOneConnectionHeader) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  std::string ones = "[1";
  for (int i = 0; i < 250'000; ++i) ones += ",1";
  ones += "]";
  const std::string chat = json{
      {"model", server->model_name()},
      {"messages", Conversation(1)},
      {"max_tokens", 1}}.dump();
  struct Case {
    std::string name;
    std::string key;
    std::string body;
    int status;
    bool refused;  // before any route: the connection closes
  };
  const std::vector<Case> cases = {
      {"wrong key", "wrong", chat, 401, true},
      {"too deep", kKey, Nested(300), 400, true},
      {"too many values", kKey, "{\"x\": " + ones + "}", 413, true},
      {"NUL and junk after the body (the route's 400)", kKey, chat + std::string("\0junk", 5), 400,
       false},
      {"answered", kKey, chat, 200, false},
  };
  for (const Case& c : cases) {
    for (bool asks_to_close : {true, false}) {
      SCOPED_TRACE(c.name + (asks_to_close ? ", Connection: close" : ""));
      RawConn conn(server->port());
      ASSERT_TRUE(conn.connected());
      ASSERT_TRUE(
          conn.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Authorization: Bearer " +
                    c.key + "\r\nContent-Type: application/json\r\n" +
                    (asks_to_close ? "Connection: close\r\n" : "") +
                    "Content-Length: " + std::to_string(c.body.size()) + "\r\n\r\n" + c.body));
      std::string head = conn.ReadUntil("\r\n\r\n");
      head = head.substr(0, head.find("\r\n\r\n") + 2);
      ASSERT_GE(head.size(), 12u);
      EXPECT_EQ(std::atoi(head.c_str() + 9), c.status) << head;
      std::string lower = head;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      size_t connection_headers = 0;
      for (size_t at = 0; (at = lower.find("\r\nconnection:", at)) != std::string::npos; ++at) {
        ++connection_headers;
      }
      const bool closes = asks_to_close || c.refused;
      EXPECT_EQ(connection_headers, closes ? 1u : 0u) << head;
      if (closes) {
        EXPECT_NE(lower.find("\r\nconnection: close\r\n"), std::string::npos) << head;
        EXPECT_EQ(lower.find("\r\nkeep-alive:"), std::string::npos) << head;
      }
    }
  }
}

// A body followed by a NUL byte and junk was accepted as the body (nlohmann's lexer ends the
// input at a NUL); OpenAI and Anthropic answer 400. Every JSON route now does too.
TEST_F(HostileInputTest, ABodyFollowedByANulAndJunkIsA400OnEveryRoute) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string nul_junk("\0{\"junk\": true}", 16);
  const std::vector<std::pair<std::string, json>> routes = {
      {"/v1/chat/completions",
       {{"model", server->model_name()}, {"messages", Conversation(1)}, {"max_tokens", 1}}},
      {"/v1/completions", {{"model", server->model_name()}, {"prompt", "hi"}, {"max_tokens", 1}}},
      {"/v1/responses",
       {{"model", server->model_name()}, {"input", "hi"}, {"max_output_tokens", 16}}},
      {"/v1/messages",
       {{"model", server->model_name()},
        {"messages", {{{"role", "user"}, {"content", "hi"}}}},
        {"max_tokens", 1}}},
      {"/trace/v1/events", {{"type", "note"}, {"text", "t"}}},
  };
  for (const auto& [route, body] : routes) {
    SCOPED_TRACE(route);
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(120, 0);
    httplib::Headers h = Auth();
    h.emplace("anthropic-version", "2023-06-01");
    auto ok = c.Post(route.c_str(), h, body.dump(), "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
    auto r = c.Post(route.c_str(), h, body.dump() + nul_junk, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("not valid JSON"), std::string::npos) << r->body;
  }
}

// Embeddings requests may carry token ids, one value each (LangChain's OpenAIEmbeddings
// sends them): the route takes up to 1,000,000 values (kMaxEmbeddingsJsonValues), so
// 300,000 token ids reach the route (here the local engine's 404: embeddings are relayed
// only in proxy mode), 1,000,001 are a 413.
TEST_F(HostileInputTest, EmbeddingsTakeTokenIdsUpToTheirOwnLimit) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  for (size_t ids : {size_t{300'000}, kMaxEmbeddingsJsonValues}) {
    SCOPED_TRACE(ids);
    std::string body = R"({"model":"m","input":[[1)";
    for (size_t i = 1; i < ids; ++i) body += ",1";
    body += "]]}";
    auto r = Post(*server, "/v1/embeddings", json(body));
    ASSERT_TRUE(r);
    const json err = json::parse(r->body, nullptr, false);
    if (ids < kMaxEmbeddingsJsonValues) {
      EXPECT_EQ(r->status, 404) << r->body;
      EXPECT_EQ(err["error"]["code"], "unsupported_endpoint") << r->body;
    } else {
      EXPECT_EQ(r->status, 413) << r->body;
      EXPECT_EQ(err["error"]["code"], "too_many_json_values") << r->body;
      EXPECT_EQ(err["error"]["param"], "input") << r->body;
    }
  }
}

}  // namespace
}  // namespace trace::recorder
