// End-to-end tests of the server's OpenAI compatibility and robustness, in-process with the
// demo model over HTTP: clients that abandon streams (before, during, and mid-batch) never
// take the server down and their calls are recorded as cancelled with what was sampled;
// any model name is served unless --served-model-name restricts it; structured outputs
// (json_schema, json_object, forced tool calls, a call cut by max_tokens); streamed
// logprobs and usage equal the non-streamed ones; legacy token prompts; signed seeds;
// max_tokens clamping; x-request-id; TCP_NODELAY on accepted sockets.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "tests/recorder/server_fixture.h"

namespace trace::recorder {
namespace {

using namespace testing;  // NOLINT: the fixture
using nlohmann::json;

// Sends a streamed request on a raw socket, reads until `read_bytes` bytes of the response
// arrived (0: none), then closes the socket without reading the rest.
void AbandonStream(int port, const json& body, size_t read_bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string text = body.dump();
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Authorization: Bearer " +
      std::string(kKey) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
      "\r\n\r\n" + text;
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  size_t got = 0;
  char buf[512];
  while (got < read_bytes) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
}

json LongRequest(int k) {
  return {{"model", "gpt-4o-mini"}, {"messages", ServerTest::Conversation(k)},
          {"stream", true},         {"max_tokens", 1500},
          {"seed", 1000 + k},       {"temperature", 1.0}};
}

TEST_F(ServerTest, AbandonedStreamsAreCancelledRecordedAndTheServerKeepsServing) {
  RecordedRun run("abandon");
  auto server = StartServer({}, run.log.get());
  ASSERT_TRUE(server);
  constexpr int kTries = 20;
  for (int k = 0; k < kTries; ++k) {
    // Every other client leaves before reading a byte; the others after the first events.
    AbandonStream(server->port(), LongRequest(k), k % 2 == 0 ? 0 : 300);
  }
  // Four streams batched together, two of them abandoned mid-way: the two that stay get
  // exactly what they get alone.
  auto alone_server = StartServer();
  ASSERT_TRUE(alone_server);
  json keep0 = {{"messages", Conversation(50)}, {"max_tokens", 24}, {"seed", 5}};
  json keep1 = {{"messages", Conversation(51)}, {"max_tokens", 24}, {"seed", 6}};
  json alone0 = Chat(*alone_server, keep0), alone1 = Chat(*alone_server, keep1);
  json batched0, batched1;
  std::vector<std::thread> threads;
  threads.emplace_back([&] { AbandonStream(server->port(), LongRequest(60), 200); });
  threads.emplace_back([&] { batched0 = ChatStream(*server, keep0); });
  threads.emplace_back([&] { AbandonStream(server->port(), LongRequest(61), 200); });
  threads.emplace_back([&] { batched1 = ChatStream(*server, keep1); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(batched0["trace"]["token_ids"], alone0["trace"]["token_ids"]);
  EXPECT_EQ(batched1["trace"]["logits_digests"], alone1["trace"]["logits_digests"]);
  // Still serving.
  json after = Chat(*server, {{"messages", Conversation(3)}, {"max_tokens", 4}});
  EXPECT_EQ(after["choices"][0]["message"]["role"], "assistant");
  server->Stop();

  int cancelled = 0;
  std::vector<proto::LlmCall> calls = run.Calls();
  ASSERT_EQ(calls.size(), static_cast<size_t>(kTries + 2 + 2 + 1));
  for (const proto::LlmCall& c : calls) {
    EXPECT_EQ(c.http_status(), 200);
    EXPECT_EQ(c.token_ids_size(), c.logits_digests_size());
    if (c.finish_reason() == "cancelled") {
      ++cancelled;
      EXPECT_LT(c.token_ids_size(), 1500) << "a cancelled call ran to its limit";
      EXPECT_EQ(c.model(), "gpt-4o-mini");
    }
  }
  EXPECT_EQ(cancelled, kTries + 2);
}

TEST_F(ServerTest, AnyModelNameIsServedUnlessRestricted) {
  RecordedRun run("names");
  auto open = StartServer({}, run.log.get());
  ASSERT_TRUE(open);
  json body = {{"model", "gpt-4o-mini"}, {"messages", Conversation(1)}, {"max_tokens", 3}};
  auto r = Post(*open, "/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["model"], "gpt-4o-mini");
  httplib::Client c("127.0.0.1", open->port());
  httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kKey}};
  auto one = c.Get("/v1/models/gpt-4o-mini", auth);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  EXPECT_EQ(json::parse(one->body)["id"], "gpt-4o-mini");
  auto list = c.Get("/v1/models", auth);
  EXPECT_EQ(json::parse(list->body)["data"][0]["id"], open->model_name());
  open->Stop();
  auto calls = run.Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].model(), "gpt-4o-mini");  // recorded as asked

  auto strict = StartServer({}, nullptr, {"alpha", "beta"});
  ASSERT_TRUE(strict);
  httplib::Client s("127.0.0.1", strict->port());
  json names = json::parse(s.Get("/v1/models", auth)->body);
  ASSERT_EQ(names["data"].size(), 2u);
  EXPECT_EQ(names["data"][1]["id"], "beta");
  EXPECT_EQ(s.Get("/v1/models/beta", auth)->status, 200);
  auto missing = s.Get("/v1/models/gpt-4o-mini", auth);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], "model_not_found");
  auto refused = Post(*strict, "/v1/chat/completions", body);
  EXPECT_EQ(refused->status, 404);
  EXPECT_NE(refused->body.find("alpha"), std::string::npos) << refused->body;
  body["model"] = "beta";
  EXPECT_EQ(Post(*strict, "/v1/chat/completions", body)->status, 200);
}

const char* kContactSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "address": {"type": "object", "properties": {"zip": {"type": "string", "minLength": 5,
                "maxLength": 5}}, "required": ["zip"], "additionalProperties": false},
    "tags": {"type": "array", "items": {"enum": ["new", "vip"]}, "maxItems": 2}},
    "required": ["name", "age", "address", "tags"], "additionalProperties": false})";

// Code points in UTF-8 text (what maxLength counts).
size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

TEST_F(ServerTest, StructuredOutputsFollowTheSchema) {
  using ojson = nlohmann::ordered_json;
  auto server = StartServer();
  ASSERT_TRUE(server);
  for (int seed = 0; seed < 3; ++seed) {
    // Sent with the schema's keys in its own order (an ordered body, as SDKs send it).
    ojson body = {
        {"model", server->model_name()},
        {"messages", ojson(Conversation(seed))},
        {"max_tokens", 400},
        {"seed", seed},
        {"response_format",
         {{"type", "json_schema"},
          {"json_schema",
           {{"name", "contact"}, {"strict", true}, {"schema", ojson::parse(kContactSchema)}}}}}};
    auto resp = Post(*server, "/v1/chat/completions", json(body.dump()));
    ASSERT_TRUE(resp);
    ASSERT_EQ(resp->status, 200) << resp->body;
    json r = json::parse(resp->body);
    ASSERT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
    std::string content = r["choices"][0]["message"]["content"];
    ojson v = ojson::parse(content, nullptr, false);
    ASSERT_TRUE(v.is_object()) << content;
    std::vector<std::string> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    EXPECT_EQ(keys, (std::vector<std::string>{"name", "age", "address", "tags"})) << content;
    EXPECT_LE(v["age"].get<int>(), 120);
    EXPECT_EQ(CodePoints(v["address"]["zip"].get<std::string>()), 5u) << content;
    EXPECT_LE(CodePoints(v["name"].get<std::string>()), 20u) << content;
  }
  json obj = Chat(*server, {{"messages", Conversation(4)},
                            {"max_tokens", 300},
                            {"seed", 4},
                            {"response_format", {{"type", "json_object"}}}});
  if (obj["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(
        json::parse(obj["choices"][0]["message"]["content"].get<std::string>()).is_object());
  }
  // strict: true with a keyword it cannot enforce: a 400 naming it.
  json bad = {{"model", server->model_name()},
              {"messages", Conversation(1)},
              {"response_format",
               {{"type", "json_schema"},
                {"json_schema",
                 {{"name", "x"},
                  {"strict", true},
                  {"schema", {{"type", "string"}, {"pattern", "^a+$"}}}}}}}};
  auto r = Post(*server, "/v1/chat/completions", bad);
  ASSERT_EQ(r->status, 400) << r->body;
  json err = json::parse(r->body)["error"];
  EXPECT_EQ(err["param"], "response_format");
  EXPECT_NE(err["message"].get<std::string>().find("'pattern'"), std::string::npos);
}

TEST_F(ServerTest, ForcedToolCallsFollowNestedSchemasAndACutCallIsNotContent) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  using ojson = nlohmann::ordered_json;
  ojson tools = ojson::array({{{"type", "function"},
                               {"function",
                                {{"name", "add_contact"},
                                 {"strict", true},
                                 {"parameters", ojson::parse(kContactSchema)}}}}});
  ojson body = {{"model", server->model_name()},
                {"messages", ojson(Conversation(2))},
                {"tools", tools},
                {"tool_choice", "required"},
                {"parallel_tool_calls", false},
                {"max_tokens", 400},
                {"seed", 2}};
  auto resp = Post(*server, "/v1/chat/completions", json(body.dump()));
  ASSERT_TRUE(resp);
  json r = json::parse(resp->body);
  ASSERT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
  const json& call = r["choices"][0]["message"]["tool_calls"][0];
  nlohmann::ordered_json args =
      nlohmann::ordered_json::parse(call["function"]["arguments"].get<std::string>());
  EXPECT_EQ(args.begin().key(), "name");  // schema order, not sorted
  EXPECT_TRUE(args["address"].is_object());
  EXPECT_LE(args["age"].get<int>(), 120);
  // Cut by max_tokens: the call with its partial arguments, finish_reason length.
  json cut = Chat(*server, {{"messages", Conversation(2)},
                            {"tools", json(tools)},
                            {"tool_choice", "required"},
                            {"max_tokens", 18},
                            {"seed", 2}});
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
  const json& msg = cut["choices"][0]["message"];
  std::string content = msg["content"].is_string() ? msg["content"].get<std::string>() : "";
  EXPECT_EQ(content.find("<tool_call>"), std::string::npos) << cut.dump();
}

TEST_F(ServerTest, StreamedLogprobsAndUsageEqualTheNonStreamedOnes) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  json req = {{"messages", Conversation(7)}, {"max_tokens", 12}, {"seed", 8}, {"logprobs", true},
              {"top_logprobs", 2},           {"stop", "ab"}};
  json plain = Chat(*server, req);
  req["model"] = server->model_name();
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto r = Post(*server, "/v1/chat/completions", req);
  ASSERT_TRUE(r);
  json logprobs = json::array(), usage;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    json chunk = json::parse(line.substr(6));
    if (chunk.contains("usage")) usage = chunk["usage"];
    for (const json& c : chunk["choices"]) {
      if (c["logprobs"].is_object()) {
        for (const json& t : c["logprobs"]["content"]) logprobs.push_back(t);
      }
    }
  }
  EXPECT_EQ(logprobs, plain["choices"][0]["logprobs"]["content"]);
  ASSERT_TRUE(usage.is_object()) << r->body;
  // The second request found the first's prompt in the prefix cache; the rest is equal.
  EXPECT_GT(usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  usage["prompt_tokens_details"] = plain["usage"]["prompt_tokens_details"];
  EXPECT_EQ(usage, plain["usage"]);
}

TEST_F(ServerTest, SmallerOpenAiBehaviours) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  // A negative seed comes back as sent.
  json seeded = Chat(*server, {{"messages", Conversation(1)}, {"max_tokens", 2}, {"seed", -5}});
  EXPECT_EQ(seeded["trace"]["seed"], -5);
  // max_tokens beyond the context is clamped, not refused.
  json big = Chat(*server, {{"messages", Conversation(1)},
                            {"max_tokens", 2000000},
                            {"seed", 1},
                            {"stop", {" ", "e", "a", "."}}});
  EXPECT_EQ(big["object"], "chat.completion");
  // Legacy completions: a prompt of token ids equals the same prompt as text.
  json text_prompt = {
      {"model", "m"}, {"prompt", "Once upon a time"}, {"max_tokens", 5}, {"seed", 3}};
  auto a = Post(*server, "/v1/completions", text_prompt);
  ASSERT_EQ(a->status, 200) << a->body;
  json ids = json::array();
  auto enc = json::parse(a->body);
  auto tok = engine::Tokenizer::Load(model_dir() + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  for (int32_t id : (*tok)->Encode("Once upon a time")) ids.push_back(id);
  json id_prompt = text_prompt;
  id_prompt["prompt"] = ids;
  auto b = Post(*server, "/v1/completions", id_prompt);
  ASSERT_EQ(b->status, 200) << b->body;
  EXPECT_EQ(json::parse(b->body)["trace"]["token_ids"], enc["trace"]["token_ids"]);
  EXPECT_EQ(json::parse(b->body)["choices"][0]["text"], enc["choices"][0]["text"]);
  id_prompt["prompt"] = json::array({ids, ids});
  EXPECT_EQ(Post(*server, "/v1/completions", id_prompt)->status, 400);
  // Every reply names itself.
  EXPECT_FALSE(a->get_header_value("x-request-id").empty());
  EXPECT_NE(a->get_header_value("x-request-id"), b->get_header_value("x-request-id"));
}

// The accepted sockets of this process's server on `port` (its client connections).
std::vector<int> AcceptedSockets(int port) {
  std::vector<int> out;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* e = readdir(dir)) {
    int fd = atoi(e->d_name);
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening) continue;
    sockaddr_in addr{};
    len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        addr.sin_family != AF_INET || ntohs(addr.sin_port) != port) {
      continue;
    }
    out.push_back(fd);
  }
  closedir(dir);
  return out;
}

TEST_F(ServerTest, AcceptedSocketsHaveNagleOff) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  httplib::Client c("127.0.0.1", server->port());
  c.set_keep_alive(true);
  ASSERT_TRUE(c.Get("/health"));  // the connection stays open
  std::vector<int> fds = AcceptedSockets(server->port());
  ASSERT_FALSE(fds.empty());
  for (int fd : fds) {
    int nodelay = 0;
    socklen_t len = sizeof nodelay;
    ASSERT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
    EXPECT_EQ(nodelay, 1) << "fd " << fd;
  }
}

}  // namespace
}  // namespace trace::recorder
