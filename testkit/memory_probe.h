// What one request may cost the recorder's server in memory, measured from outside: a
// `trace serve` process of its own per body (the demo model), the bodies that cost the most
// per byte (many tiny messages, one huge message, tiny JSON values, content parts, tools,
// wide and deep tool schemas, tool-call arguments, each API), and the growth of the
// server's peak resident set (VmHWM in /proc/PID/status) over its resident set after a
// warm-up request. Shared by tests/recorder/memory_test.cc (asserts the bound) and
// bench/recorder/memory_bench.cc (reports bytes of growth per byte of body).
//
// Ownership: values; a ServeProcess owns its child process (SIGTERM and wait on
// destruction). Thread safety: one ServeProcess per thread. Errors: a server that does not
// start leaves ok() false with error() saying why; a transport failure gives a Reply with
// status 0.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace trace::recorder::testing {

// One request body and what the server must answer it with.
struct ProbeBody {
  std::string name;
  std::string path;  // the route
  std::string body;
  bool chunked = false;  // sent with Transfer-Encoding: chunked instead of Content-Length
  int status = 0;        // the expected HTTP status
  std::string code;      // the expected error code (OpenAI's error.code), "" for none
};

namespace memory_probe_detail {

// `count` copies of `item` joined by commas.
inline std::string Repeat(const std::string& item, size_t count) {
  std::string out;
  out.reserve(count * (item.size() + 1));
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out += ',';
    out += item;
  }
  return out;
}

// Copies of `make(i)` joined by commas while the text stays under `bytes`.
template <typename Make>
std::string RepeatTo(size_t bytes, Make make, size_t* count = nullptr) {
  std::string out;
  out.reserve(bytes + 256);
  size_t i = 0;
  for (;; ++i) {
    const std::string item = make(i);
    if (out.size() + item.size() + 1 > bytes) break;
    if (i > 0) out += ',';
    out += item;
  }
  if (count != nullptr) *count = i;
  return out;
}

inline std::string Tool(size_t i) {
  return R"({"type":"function","function":{"name":"f)" + std::to_string(i) +
         R"(","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}})";
}

// A tool whose schema nests `levels` objects (6 values and keys a level).
inline std::string DeepTool(size_t i, int levels) {
  std::string schema = R"({"type":"string"})";
  for (int k = 0; k < levels; ++k)
    schema = R"({"type":"object","properties":{"a":)" + schema + "}}";
  return R"({"type":"function","function":{"name":"f)" + std::to_string(i) + R"(","parameters":)" +
         schema + "}}";
}

inline std::string ChatBody(const std::string& messages, const std::string& extra = "") {
  return R"({"model":"m","max_tokens":1,"messages":[)" + messages + "]" + extra + "}";
}

constexpr const char* kHi = R"({"role":"user","content":"hi"})";
constexpr const char* kTiny = R"({"role":"user","content":"x"})";

}  // namespace memory_probe_detail

// Bodies of about `bytes` each (the default --max-body-bytes is 32 MiB) that are refused
// as soon as they are read: too many values, or more text than the demo model's context
// can take.
inline std::vector<ProbeBody> OversizedBodies(size_t bytes) {
  using namespace memory_probe_detail;
  const std::string chat = "/v1/chat/completions";
  std::vector<ProbeBody> out;
  const size_t room = bytes - 256;
  auto tiny_messages = RepeatTo(room, [](size_t) { return std::string(kTiny); });
  out.push_back(
      {"many tiny messages", chat, ChatBody(tiny_messages), false, 413, "too_many_json_values"});
  out.push_back({"many tiny messages, chunked", chat, ChatBody(tiny_messages), true, 413,
                 "too_many_json_values"});
  std::string text;
  text.reserve(room);
  while (text.size() + 2 <= room) text += "a ";
  out.push_back({"one huge message", chat, ChatBody(R"({"role":"user","content":")" + text + "\"}"),
                 false, 400, "context_length_exceeded"});
  out.push_back({"one huge prompt (completions)", "/v1/completions",
                 R"({"model":"m","max_tokens":1,"prompt":")" + text + "\"}", false, 400,
                 "context_length_exceeded"});
  text.clear();
  text.shrink_to_fit();
  out.push_back({"tiny JSON values in an ignored field", chat,
                 ChatBody(kHi, ",\"x\":[" + Repeat("1", room / 2) + "]"), false, 413,
                 "too_many_json_values"});
  out.push_back(
      {"many content parts", chat,
       ChatBody(
           R"({"role":"user","content":[)" +
           RepeatTo(room, [](size_t) { return std::string(R"({"type":"text","text":"x"})"); }) +
           "]}"),
       false, 413, "too_many_json_values"});
  out.push_back({"many tools", chat, ChatBody(kHi, ",\"tools\":[" + RepeatTo(room, Tool) + "]"),
                 false, 413, "too_many_json_values"});
  out.push_back(
      {"one wide tool schema", chat,
       ChatBody(kHi, R"(,"tools":[{"type":"function","function":{"name":"f","parameters":)"
                     R"({"type":"object","properties":{)" +
                         RepeatTo(room,
                                  [](size_t i) {
                                    return "\"p" + std::to_string(i) + R"(":{"type":"string"})";
                                  }) +
                         "}}}}]"),
       false, 413, "too_many_json_values"});
  out.push_back({"deep tool schemas", chat,
                 ChatBody(kHi, ",\"tools\":[" +
                                   RepeatTo(room, [](size_t i) { return DeepTool(i, 120); }) + "]"),
                 false, 413, "too_many_json_values"});
  out.push_back({"tool-call arguments of tiny values", chat,
                 ChatBody(std::string(kHi) +
                          R"(,{"role":"assistant","content":null,"tool_calls":[{"id":"c1",)"
                          R"("type":"function","function":{"name":"f","arguments":"[)" +
                          Repeat("1", 600'000) +
                          R"(]"}}]},{"role":"tool","tool_call_id":"c1",)"
                          R"("content":"ok"})"),
                 false, 413, "too_many_json_values"});
  out.push_back(
      {"many tiny messages (Anthropic)", "/v1/messages", ChatBody(tiny_messages), false, 413, ""});
  out.push_back({"many tiny input items (Responses)", "/v1/responses",
                 R"({"model":"m","max_output_tokens":16,"input":[)" + tiny_messages + "]}", false,
                 413, "too_many_json_values"});
  return out;
}

// Bodies within the limits that cost the most memory per byte: just under the count of
// values (kMaxJsonValues, 250,000) in the shapes that cost the most per value, and a prompt
// just under what the demo model's context can take (3 x 128 bytes x 8192 tokens = 3 MiB),
// which is rendered and tokenized before it is refused for its tokens.
inline std::vector<ProbeBody> BodiesAtTheLimits() {
  using namespace memory_probe_detail;
  const std::string chat = "/v1/chat/completions";
  constexpr size_t kValues = 249'000;
  std::vector<ProbeBody> out;
  out.push_back({"tiny messages at the value limit", chat, ChatBody(Repeat(kTiny, kValues / 5)),
                 false, 400, "context_length_exceeded"});
  out.push_back({"wide tool schema at the value limit", chat,
                 ChatBody(
                     kHi, R"(,"tools":[{"type":"function","function":{"name":"f","parameters":)"
                          R"({"type":"object","properties":{)" +
                              [&] {
                                std::string props;
                                for (size_t i = 0; i < (kValues - 40) / 4; ++i) {
                                  if (i > 0) props += ',';
                                  props += "\"p" + std::to_string(i) + R"(":{"type":"string"})";
                                }
                                return props;
                              }() +
                              "}}}}]"),
                 false, 400, "context_length_exceeded"});
  {
    std::string tools;
    for (size_t i = 0; i < (kValues - 20) / (8 + 6 * 120 + 3); ++i) {
      if (i > 0) tools += ',';
      tools += DeepTool(i, 120);
    }
    out.push_back({"deep tool schemas at the value limit", chat,
                   ChatBody(kHi, ",\"tools\":[" + tools + "]"), false, 400,
                   "context_length_exceeded"});
  }
  std::string text((size_t{3} << 20) - 128, ' ');
  for (size_t i = 0; i < text.size(); i += 2) text[i] = 'a';
  out.push_back({"prompt at the context's byte bound", chat,
                 ChatBody(R"({"role":"user","content":")" + text + "\"}"), false, 400,
                 "context_length_exceeded"});
  return out;
}

// A `trace serve` process with the demo model (or `model_dir`), its key and a store of its
// own, on a free port.
class ServeProcess {
 public:
  ServeProcess(const std::string& trace_binary, const std::string& model_dir,
               const std::string& store_path, const std::string& key)
      : key_(key) {
    int fds[2];
    if (pipe(fds) != 0) {
      error_ = "pipe failed";
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<std::string> args = {trace_binary, "--store", store_path, "serve",
                                     "--model",    model_dir, "--port",   "0"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string key_env = "TRACE_API_KEY=" + key;
    std::vector<char*> envp = {key_env.data()};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TRACE_API_KEY=", 14) != 0) envp.push_back(*e);
    }
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      pid_ = -1;
      error_ = "cannot start " + trace_binary;
      return;
    }
    // "serving on http://127.0.0.1:PORT/v1"; a fail-safe timeout only turns a hang into a
    // failure.
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (out.find("/v1\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) continue;
      char buf[512];
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    close(fds[0]);
    const size_t at = out.find("serving on http://127.0.0.1:");
    if (at == std::string::npos) {
      error_ = "no 'serving on' line from trace serve: " + out;
      return;
    }
    port_ = std::atoi(out.c_str() + at + std::strlen("serving on http://127.0.0.1:"));
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool ok() const { return port_ > 0; }
  const std::string& error() const { return error_; }
  pid_t pid() const { return pid_; }

  // VmRSS and VmHWM (the peak since start or the last ResetPeak), in bytes; 0 if unread.
  size_t Rss() const { return StatusBytes("VmRSS:"); }
  size_t PeakRss() const { return StatusBytes("VmHWM:"); }
  // Sets the peak to the current resident set (/proc/PID/clear_refs "5"); false where the
  // kernel does not allow it (then the peak since start stands).
  bool ResetPeak() const {
    std::ofstream f("/proc/" + std::to_string(pid_) + "/clear_refs");
    f << "5";
    f.flush();
    return f.good();
  }

  struct Reply {
    int status = 0;
    std::string head;
    std::string body;
  };
  // Sends one request with `Connection: close` on a new connection and reads the whole
  // reply (the server closes after it).
  Reply Send(const ProbeBody& b) const {
    Reply r;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return r;
    }
    timeval tv{300, 0};  // fail-safe only
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string head = "POST " + b.path +
                       " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       "Authorization: Bearer " +
                       key_ + "\r\nanthropic-version: 2023-06-01\r\nConnection: close\r\n";
    std::string payload;
    if (b.chunked) {
      head += "Transfer-Encoding: chunked\r\n\r\n";
      // Chunks of 64 KiB, as a streaming client sends them.
      char size[32];
      for (size_t off = 0; off < b.body.size(); off += 65536) {
        const size_t n = std::min<size_t>(65536, b.body.size() - off);
        std::snprintf(size, sizeof size, "%zx\r\n", n);
        payload += size;
        payload.append(b.body, off, n);
        payload += "\r\n";
      }
      payload += "0\r\n\r\n";
    } else {
      head += "Content-Length: " + std::to_string(b.body.size()) + "\r\n\r\n";
    }
    // The server may answer and close before the whole body is sent (a refusal on the
    // head): a failed send is not an error, the reply is what counts.
    bool sent = SendAll(fd, head);
    if (sent) sent = SendAll(fd, b.chunked ? payload : b.body);
    std::string in;
    char buf[65536];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) in.append(buf, static_cast<size_t>(n));
    close(fd);
    const size_t end = in.find("\r\n\r\n");
    if (in.size() < 12 || end == std::string::npos) return r;
    r.status = std::atoi(in.c_str() + 9);
    r.head = in.substr(0, end);
    r.body = in.substr(end + 4);
    return r;
  }

 private:
  static bool SendAll(int fd, const std::string& data) {
    for (size_t off = 0; off < data.size();) {
      const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  size_t StatusBytes(const char* field) const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(f, line);) {
      if (line.rfind(field, 0) == 0) {
        return static_cast<size_t>(std::strtoull(line.c_str() + std::strlen(field), nullptr, 10)) *
               1024;
      }
    }
    return 0;
  }

  std::string key_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string error_;
};

// One body sent to a fresh server after a warm-up request (a 1-token chat, so the first
// request's one-time costs are not counted): the growth of the peak resident set over the
// resident set after the warm-up.
struct Measurement {
  std::string error;  // the server did not start or the warm-up failed
  size_t body_bytes = 0;
  size_t base_rss = 0;
  size_t growth = 0;
  bool peak_reset = false;  // false: the peak since start was used (clear_refs refused)
  ServeProcess::Reply reply;
};

inline Measurement MeasureInFreshServer(const std::string& trace_binary,
                                        const std::string& model_dir, const std::string& store_path,
                                        const ProbeBody& body) {
  Measurement m;
  m.body_bytes = body.body.size();
  ServeProcess server(trace_binary, model_dir, store_path, "memory-probe-key");
  if (!server.ok()) {
    m.error = server.error();
    return m;
  }
  ProbeBody warm;
  warm.name = "warm-up";
  warm.path = "/v1/chat/completions";
  warm.body = memory_probe_detail::ChatBody(memory_probe_detail::kHi);
  warm.status = 200;
  if (ServeProcess::Reply r = server.Send(warm); r.status != 200) {
    m.error = "warm-up request answered " + std::to_string(r.status) + ": " + r.body;
    return m;
  }
  m.peak_reset = server.ResetPeak();
  m.base_rss = server.Rss();
  m.reply = server.Send(body);
  const size_t peak = server.PeakRss();
  m.growth = peak > m.base_rss ? peak - m.base_rss : 0;
  return m;
}

}  // namespace trace::recorder::testing
