// trace_client.h: tell the trace recorder what the model API cannot see — one header,
// POSIX sockets and the C++17 standard library only, no other dependency.
//
//   trace_client::Client tc;  // from $TRACE_ENDPOINT and $OPENAI_API_KEY
//   tc.ToolResult("call_1", result_json, "lookup_customer");
//   tc.Context(chunk, "policies/refunds.md", "refunds#2");
//   tc.TemplateVar("customer_name", "Ada");
//   int64_t now_ns = tc.ClockNs();  // the recorder's wall clock, recorded
//   std::string out = tc.Tool("delete_customer", R"({"customer_id":4})",
//                             [&] { return db.Delete(4); });  // fn() live; under
//                             // `trace rerun` the recorded result, fn not called
//
// Ownership: a Client holds only strings; copy it freely. Thread safety: every method is
// one blocking HTTP request on its own connection, safe from several threads. Errors:
// methods return false (ClockNs: -1) and set error() when the recorder rejects the event
// or cannot be reached; outside `trace record` (no TRACE_ENDPOINT) they do nothing and
// succeed, and ClockNs reads the local clock.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace trace_client {

// JSON string literal with the escapes JSON requires.
inline std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

class Client {
 public:
  Client() {
    const char* endpoint = std::getenv("TRACE_ENDPOINT");
    const char* key = std::getenv("OPENAI_API_KEY");
    Init(endpoint ? endpoint : "", key ? key : "");
  }
  Client(const std::string& endpoint, const std::string& api_key) { Init(endpoint, api_key); }

  bool enabled() const { return !host_.empty(); }
  const std::string& error() const { return error_; }

  // `arguments_json` is JSON text, e.g. R"({"id": 7})".
  bool ToolCall(const std::string& name, const std::string& arguments_json,
                const std::string& call_id = "") {
    return Post("{\"type\":\"tool_call\",\"name\":" + Quote(name) +
                ",\"call_id\":" + Quote(call_id) + ",\"arguments\":" + Quote(arguments_json) + "}");
  }
  bool ToolResult(const std::string& call_id, const std::string& content,
                  const std::string& name = "", bool is_error = false) {
    return Post("{\"type\":\"tool_result\",\"call_id\":" + Quote(call_id) +
                ",\"name\":" + Quote(name) + ",\"content\":" + Quote(content) +
                ",\"is_error\":" + (is_error ? "true" : "false") + "}");
  }
  bool Context(const std::string& content, const std::string& source = "",
               const std::string& chunk_id = "") {
    return Post("{\"type\":\"context\",\"content\":" + Quote(content) +
                ",\"source\":" + Quote(source) + ",\"chunk_id\":" + Quote(chunk_id) + "}");
  }
  bool TemplateVar(const std::string& name, const std::string& value,
                   const std::string& template_name = "") {
    return Post("{\"type\":\"template_var\",\"name\":" + Quote(name) +
                ",\"value\":" + Quote(value) + ",\"template\":" + Quote(template_name) + "}");
  }
  bool Note(const std::string& text, const std::string& topic = "agent") {
    return Post("{\"type\":\"note\",\"text\":" + Quote(text) + ",\"topic\":" + Quote(topic) + "}");
  }
  // The recorder's wall clock in Unix ns (recorded as a ClockRead); -1 on error.
  int64_t ClockNs() {
    if (!enabled()) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    }
    std::string body;
    if (!Request("GET", "/trace/v1/clock", "", &body)) return -1;
    size_t at = body.find("\"wall_ns\":");
    if (at == std::string::npos) {
      error_ = "trace clock reply without wall_ns";
      return -1;
    }
    return std::strtoll(body.c_str() + at + 10, nullptr, 10);
  }
  // Runs the tool `name` as fn() and records its result; under `trace rerun`, while the
  // run follows its recording, returns the recorded result without calling fn (a tool with
  // side effects is not run again). `arguments_json`: JSON text ("{}" when empty);
  // `call_id`: the model's tool-call id, if the model asked for the call. *is_error (may be
  // null): the recorded result was an error. On a recorder error, fn runs and error() says
  // why the result could not be recorded.
  std::string Tool(const std::string& name, const std::string& arguments_json,
                   const std::function<std::string()>& fn, const std::string& call_id = "",
                   bool* is_error = nullptr) {
    if (is_error != nullptr) *is_error = false;
    const std::string args = arguments_json.empty() ? "{}" : arguments_json;
    std::string id = call_id;
    if (enabled()) {
      std::string reply;
      if (Request("POST", "/trace/v1/tool",
                  "{\"name\":" + Quote(name) + ",\"arguments\":" + args +
                      ",\"call_id\":" + Quote(call_id) + "}",
                  &reply) &&
          reply.find("\"recorded\":true") != std::string::npos) {
        if (is_error != nullptr) *is_error = reply.find("\"is_error\":true") != std::string::npos;
        return StringMember(reply, "content");
      }
      if (id.empty()) {
        id = "agent_" + name + "_" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
        ToolCall(name, args, id);
      }
    }
    std::string result = fn();
    ToolResult(id, result, name);
    return result;
  }
  // Waits until everything recorded so far is durable.
  bool Flush() { return !enabled() || Request("POST", "/trace/v1/flush", "{}", nullptr); }

 private:
  // The string member `key` of a flat JSON object (the recorder's reply), unescaped;
  // \\uXXXX escapes become UTF-8 (surrogate pairs joined).
  static std::string StringMember(const std::string& body, const std::string& key) {
    size_t at = body.find("\"" + key + "\":\"");
    if (at == std::string::npos) return "";
    std::string out;
    for (size_t i = at + key.size() + 4; i < body.size() && body[i] != '"'; ++i) {
      if (body[i] != '\\' || i + 1 >= body.size()) {
        out += body[i];
        continue;
      }
      char c = body[++i];
      switch (c) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          unsigned long cp = std::strtoul(body.substr(i + 1, 4).c_str(), nullptr, 16);
          i += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && body.compare(i + 1, 2, "\\u") == 0) {
            unsigned long lo = std::strtoul(body.substr(i + 3, 4).c_str(), nullptr, 16);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default:
          out += c;  // " \\ /
      }
    }
    return out;
  }

  void Init(const std::string& endpoint, const std::string& key) {
    api_key_ = key;
    std::string rest = endpoint;
    if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
    size_t slash = rest.find('/');
    if (slash != std::string::npos) rest = rest.substr(0, slash);
    size_t colon = rest.rfind(':');
    host_ = colon == std::string::npos ? rest : rest.substr(0, colon);
    port_ = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  }

  bool Post(const std::string& json) {
    return !enabled() || Request("POST", "/trace/v1/events", json, nullptr);
  }

  bool Request(const std::string& method, const std::string& path, const std::string& body,
               std::string* reply_body) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addrs = nullptr;
    if (getaddrinfo(host_.c_str(), port_.c_str(), &hints, &addrs) != 0 || !addrs) {
      error_ = "trace recorder " + host_ + ":" + port_ + " cannot be resolved";
      return false;
    }
    int fd = socket(addrs->ai_family, addrs->ai_socktype, addrs->ai_protocol);
    bool connected = fd >= 0 && connect(fd, addrs->ai_addr, addrs->ai_addrlen) == 0;
    freeaddrinfo(addrs);
    if (!connected) {
      if (fd >= 0) close(fd);
      error_ = "trace recorder at " + host_ + ":" + port_ + " unreachable";
      return false;
    }
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: " + host_ + ":" + port_ +
                      "\r\nConnection: close\r\nContent-Type: application/json\r\n";
    if (!api_key_.empty()) req += "Authorization: Bearer " + api_key_ + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    for (size_t sent = 0; sent < req.size();) {
      ssize_t n = send(fd, req.data() + sent, req.size() - sent, 0);
      if (n <= 0) {
        close(fd);
        error_ = "trace recorder: send failed";
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    std::string reply;
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, n);
    close(fd);
    int status = reply.size() > 12 ? std::atoi(reply.c_str() + 9) : 0;
    size_t split = reply.find("\r\n\r\n");
    std::string payload = split == std::string::npos ? "" : reply.substr(split + 4);
    if (status != 200) {
      error_ = "trace recorder rejected " + method + " " + path + " (HTTP " +
               std::to_string(status) + "): " + payload;
      return false;
    }
    if (reply_body) *reply_body = payload;
    error_.clear();
    return true;
  }

  std::string host_, port_, api_key_, error_;
};

}  // namespace trace_client
