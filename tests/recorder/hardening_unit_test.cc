// Unit tests of the recorder's defences against hostile input that need no socket: the
// JSON nesting-depth limit (every request parser, 100,000 levels), numbers out of range in
// the event API, the head checks (Host, Origin, API key, body framing), and what is kept
// out of a recorded run (secret argv values, URL credentials, the key file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "recorder/api/json_body.h"
#include "recorder/child.h"
#include "recorder/openai_api.h"
#include "recorder/secrets.h"
#include "recorder/server/event_api.h"
#include "recorder/server/request_guard.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

std::string Nested(size_t levels, char open, char close) {
  std::string s(levels, open);
  s += std::string(levels, close);
  return s;
}

// {"a":{"a":...{}...}}
std::string NestedObjects(size_t levels) {
  std::string s;
  s.reserve(levels * 6 + 2);
  for (size_t i = 0; i < levels; ++i) s += "{\"a\":";
  s += "1";
  s.append(levels, '}');
  return s;
}

TEST(JsonDepthTest, ScanCountsBracketsOutsideStringsOnly) {
  EXPECT_FALSE(FindJsonDepthExcess("{}", 1));
  EXPECT_EQ(FindJsonDepthExcess("[[]]", 1), 1u);
  // Brackets inside strings, escaped quotes included, do not count.
  EXPECT_FALSE(FindJsonDepthExcess(R"({"a": "[[[[\"[[[[", "b": [1]})", 2));
  EXPECT_EQ(FindJsonDepthExcess(R"({"a": "\\", "b": [[1]]})", 2), 18u);
  // Closers never buy depth back below zero.
  EXPECT_EQ(FindJsonDepthExcess("]]]][[", 1), 5u);
  EXPECT_FALSE(FindJsonDepthExcess(Nested(kMaxJsonDepth, '[', ']')));
  EXPECT_EQ(FindJsonDepthExcess(Nested(kMaxJsonDepth + 1, '[', ']')), size_t{kMaxJsonDepth});
}

// The scan skips strings with memchr; a plain byte-by-byte scan is its reference, over
// random texts of brackets, quotes, escapes and letters (fixed seed).
std::optional<size_t> ReferenceDepthExcess(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

TEST(JsonDepthTest, ScanAgreesWithAByteByByteReference) {
  std::mt19937 rng(16);
  const std::string alphabet = "[]{}\"\\a";
  for (int trial = 0; trial < 20'000; ++trial) {
    std::string text(rng() % 48, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    const int max_depth = 1 + static_cast<int>(rng() % 4);
    ASSERT_EQ(FindJsonDepthExcess(text, max_depth), ReferenceDepthExcess(text, max_depth))
        << text << " max_depth " << max_depth;
  }
  // A string of 4 MiB of escapes is scanned once (linear), then the depth counts again.
  const std::string escapes = "[\"" + std::string(4 << 20, '\\') + "\"[[]]]";
  EXPECT_EQ(FindJsonDepthExcess(escapes, 2), escapes.size() - 4);
}

TEST(JsonDepthTest, HundredThousandLevelsAreA400InEveryParser) {
  const std::string arrays = Nested(100'000, '[', ']');
  const std::string objects = NestedObjects(100'000);
  // Deep JSON as the body, and deep JSON inside an otherwise valid request.
  const std::string inside_chat =
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": )" + arrays + "}";
  const std::string inside_prompt = R"({"model": "m", "prompt": "hi", "x": )" + objects + "}";
  for (const std::string* body : {&arrays, &objects, &inside_chat, &inside_prompt}) {
    for (bool chat : {true, false}) {
      auto r = ParseCompletionRequest(*body, chat);
      ASSERT_TRUE(std::holds_alternative<ApiError>(r));
      EXPECT_EQ(std::get<ApiError>(r).http_status, 400);
      EXPECT_EQ(std::get<ApiError>(r).code, "json_too_deep");
    }
    auto plain = ParseJsonBody(*body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(plain));
    EXPECT_NE(std::get<ApiError>(plain).message.find("deeper than 256 levels"), std::string::npos);
    EXPECT_TRUE(ParseJsonOrDiscarded(*body).is_discarded());
    EXPECT_TRUE(ParseOrderedJsonOrDiscarded(*body).is_discarded());
  }
  // JSON text inside a string field (a prior tool call's arguments) is parsed later, for
  // the chat template: too deep, it stays text instead of being converted.
  json msgs = json::array({{{"role", "user"}, {"content", "hi"}},
                           {{"role", "assistant"},
                            {"content", ""},
                            {"tool_calls",
                             {{{"id", "c1"},
                               {"type", "function"},
                               {"function", {{"name", "f"}, {"arguments", arrays}}}}}}}});
  auto r = ParseCompletionRequest(json{{"model", "m"}, {"messages", msgs}}.dump(), true);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
  nlohmann::ordered_json for_template =
      MessagesForTemplateOrdered(std::get<CompletionRequest>(r).messages);
  EXPECT_TRUE(for_template[1]["tool_calls"][0]["function"]["arguments"].is_string());
  // A model that writes 100,000 brackets as a tool call's arguments.
  ExtractedToolCalls ex = ExtractToolCalls(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": " + arrays + "}\n</tool_call>", "x",
      /*allow_truncated=*/false);
  EXPECT_TRUE(ex.calls.empty());
}

TEST(EventApiParseTest, NumbersOutOfRangeAreRefusedNotCast) {
  auto value_ns = [](const json& v) {
    return EventApi::ParseAgentEvent(json{{"type", "clock"}, {"value_ns", v}}, "events[2]");
  };
  for (const json& bad : {json(1e30), json(-1e30), json(18446744073709551615ull),
                          json(9223372036854775808.0), json(1.5)}) {
    auto r = value_ns(bad);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad.dump();
    const ApiError& e = std::get<ApiError>(r);
    EXPECT_EQ(e.http_status, 400) << bad.dump();
    EXPECT_EQ(e.param, "events[2].value_ns");
  }
  EXPECT_EQ(std::get<ApiError>(value_ns(json(1e30))).code, "invalid_value");
  for (const auto& [good, want] :
       std::vector<std::pair<json, int64_t>>{{json(123), 123},
                                             {json(-5), -5},
                                             {json(9223372036854775807ll), INT64_MAX},
                                             {json(1e15), 1000000000000000},
                                             {json(-9223372036854775807ll - 1), INT64_MIN}}) {
    auto r = value_ns(good);
    ASSERT_TRUE(std::holds_alternative<proto::Event>(r)) << std::get<ApiError>(r).message;
    EXPECT_EQ(std::get<proto::Event>(r).clock_read().value_ns(), want);
  }
}

TEST(EventApiParseTest, RequestIntegersOutOfRangeAreA400) {
  auto r = ParseCompletionRequest(R"({"model": "m", "prompt": "x", "seed": 1e30})", false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "seed");
  EXPECT_EQ(std::get<ApiError>(r).code, "invalid_value");
}

httplib::Request Head(std::string method, std::string path, httplib::Headers headers) {
  httplib::Request req;
  req.method = std::move(method);
  req.path = std::move(path);
  req.headers = std::move(headers);
  return req;
}

TEST(RequestGuardTest, HostsAreLoopbackNamesOrTheListenName) {
  for (const char* ok : {"127.0.0.1:8000", "localhost", "LOCALHOST.:9", "[::1]:8000", "127.3.4.5",
                         "", "[::ffff:127.0.0.1]:1"}) {
    EXPECT_TRUE(HostAllowed(ok, "127.0.0.1")) << ok;
  }
  for (const char* bad :
       {"evil.example", "evil.example:8000", "127.0.0.1.evil.example", "10.0.0.1:8000", "[::2]"}) {
    EXPECT_FALSE(HostAllowed(bad, "127.0.0.1")) << bad;
  }
  EXPECT_TRUE(HostAllowed("box.lan:8000", "box.lan"));
  EXPECT_TRUE(HostAllowed("anything.example", "0.0.0.0"));
  EXPECT_TRUE(HostAllowed("anything.example", "::"));
  auto e = CheckHost(Head("GET", "/v1/models", {{"Host", "evil.example:8000"}}), "127.0.0.1");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 403);
  EXPECT_EQ(e->code, "forbidden_host");
}

TEST(RequestGuardTest, BrowserOriginsAreRefusedUnlessAllowed) {
  EXPECT_FALSE(CheckOrigin(Head("POST", "/v1/x", {}), {}));  // agents send no Origin
  auto foreign = CheckOrigin(Head("POST", "/v1/x", {{"Origin", "https://evil.example"}}), {});
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->http_status, 403);
  EXPECT_EQ(foreign->code, "forbidden_origin");
  EXPECT_TRUE(CheckOrigin(Head("POST", "/v1/x", {{"Origin", "null"}}), {}));
  EXPECT_TRUE(CheckOrigin(Head("GET", "/v1/x", {{"Sec-Fetch-Site", "cross-site"}}), {}));
  EXPECT_FALSE(CheckOrigin(Head("GET", "/v1/x", {{"Sec-Fetch-Site", "none"}}), {}));
  EXPECT_FALSE(CheckOrigin(Head("POST", "/v1/x", {{"Origin", "http://localhost:3000"}}),
                           {"http://localhost:3000/"}));
  EXPECT_TRUE(CheckOrigin(Head("POST", "/v1/x", {{"Origin", "http://localhost:3001"}}),
                          {"http://localhost:3000"}));
  EXPECT_FALSE(CheckOrigin(Head("POST", "/v1/x", {{"Origin", "https://any.example"}}), {"*"}));
}

TEST(RequestGuardTest, ApiKeyFromBearerOrXApiKeyComparedWhole) {
  EXPECT_FALSE(CheckApiKey(Head("GET", "/", {{"Authorization", "Bearer k1"}}), "k1"));
  EXPECT_FALSE(CheckApiKey(Head("GET", "/", {{"Authorization", "bearer  k1 "}}), "k1"));
  EXPECT_FALSE(CheckApiKey(Head("GET", "/", {{"x-api-key", "k1"}}), "k1"));
  EXPECT_FALSE(CheckApiKey(Head("GET", "/", {}), ""));  // no key configured: no check
  for (const httplib::Headers& h : std::vector<httplib::Headers>{{},
                                                                 {{"Authorization", "Bearer k"}},
                                                                 {{"Authorization", "Bearer k1x"}},
                                                                 {{"Authorization", "Basic k1"}},
                                                                 {{"x-api-key", ""}}}) {
    auto e = CheckApiKey(Head("GET", "/", h), "k1");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->http_status, 401);
  }
  EXPECT_TRUE(ConstantTimeEquals("same", "same"));
  EXPECT_FALSE(ConstantTimeEquals("same", "sam"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
}

TEST(RequestGuardTest, BodyFramingIsCheckedOnTheHead) {
  const size_t max = 1000;
  auto status = [&](httplib::Request req) {
    auto e = CheckBodyFraming(req, max);
    return e ? e->http_status : 0;
  };
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Content-Length", "1000"}})), 0);
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Content-Length", "1001"}})), 413);
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Content-Length", "99999999999999999999999"}})), 413);
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Content-Length", "12x"}})), 400);
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Transfer-Encoding", "chunked"}})), 0);
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Transfer-Encoding", "gzip, chunked"}})), 400);
  EXPECT_EQ(
      status(Head("POST", "/v1/x", {{"Transfer-Encoding", "chunked"}, {"Content-Length", "5"}})),
      400);
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Content-Length", "5"}, {"Content-Length", "5"}})), 400);
  EXPECT_EQ(status(Head("POST", "/v1/x", {})), 411);
  // A DELETE without a body says nothing about one (DELETE /v1/responses/{id}).
  EXPECT_EQ(status(Head("DELETE", "/v1/responses/resp_1", {})), 0);
  EXPECT_EQ(status(Head("DELETE", "/v1/responses/resp_1", {{"Content-Length", "1001"}})), 413);
  EXPECT_EQ(status(Head("POST", "/v1/x", {{"Content-Length", "10"}, {"Content-Encoding", "gzip"}})),
            415);
  EXPECT_EQ(status(Head("GET", "/v1/x", {{"Content-Length", "10"}})), 400);
  EXPECT_EQ(status(Head("GET", "/v1/x", {{"Content-Length", "0"}})), 0);
  EXPECT_EQ(status(Head("GET", "/v1/x", {})), 0);
  auto e = CheckBodyFraming(Head("POST", "/v1/x", {{"Content-Length", "50000000"}}), max);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("--max-body-bytes"), std::string::npos);
  EXPECT_EQ(HttpLimits().max_body_bytes, size_t{32} << 20);
}

TEST(SecretsTest, SecretArgvValuesAreRedacted) {
  std::vector<std::string> argv = {"python3",
                                   "agent.py",
                                   "--api-key",
                                   "sk-live-123",
                                   "--token=tok456",
                                   "--hf_token",
                                   "hf_789",
                                   "--password",
                                   "hunter2",
                                   "--api-key-file",
                                   "/run/key",
                                   "--no-token",
                                   "--keep",
                                   "OPENAI_API_KEY=sk-env",
                                   "-H",
                                   "Authorization: Bearer abc.def",
                                   "--upstream",
                                   "https://user:pw@api.example/v1",
                                   "--turns",
                                   "3"};
  std::vector<std::string> want = {"python3",
                                   "agent.py",
                                   "--api-key",
                                   "[redacted]",
                                   "--token=[redacted]",
                                   "--hf_token",
                                   "[redacted]",
                                   "--password",
                                   "[redacted]",
                                   "--api-key-file",
                                   "/run/key",
                                   "--no-token",
                                   "--keep",
                                   "OPENAI_API_KEY=[redacted]",
                                   "-H",
                                   "Authorization: Bearer [redacted]",
                                   "--upstream",
                                   "https://api.example/v1",
                                   "--turns",
                                   "3"};
  EXPECT_EQ(RedactArgv(argv), want);
  // A secret flag followed by another flag redacts nothing (it had no value).
  EXPECT_EQ(RedactArgv({"--token", "--verbose"}),
            (std::vector<std::string>{"--token", "--verbose"}));
  EXPECT_TRUE(IsSecretFlag("--api-key"));
  EXPECT_TRUE(IsSecretFlag("--openai-api-key"));
  EXPECT_TRUE(IsSecretFlag("-secret"));
  EXPECT_FALSE(IsSecretFlag("--keyword"));
  EXPECT_FALSE(IsSecretFlag("--token-file"));
  EXPECT_FALSE(IsSecretFlag("-p"));
}

TEST(SecretsTest, UrlCredentialsAreStripped) {
  EXPECT_EQ(StripUrlCredentials("https://user:pass@host.example:8443/v1?q=a@b"),
            "https://host.example:8443/v1?q=a@b");
  EXPECT_EQ(StripUrlCredentials("http://token@127.0.0.1/v1"), "http://127.0.0.1/v1");
  EXPECT_EQ(StripUrlCredentials("a=http://u:p@x/ b=https://y/"), "a=http://x/ b=https://y/");
  EXPECT_EQ(StripUrlCredentials("no url here: user@example.com"), "no url here: user@example.com");
  UrlWithoutCredentials u = SplitUrlCredentials("https://me:s3cret@api.example/v1");
  EXPECT_EQ(u.url, "https://api.example/v1");
  EXPECT_EQ(u.user, "me");
  EXPECT_EQ(u.password, "s3cret");
  EXPECT_TRUE(u.had_credentials);
  std::string env_url = "OPENAI_BASE_URL=https://me:s3cret@api.example/v1";
  std::string env_path = "PATH=/usr/bin";
  char* envp[] = {env_url.data(), env_path.data(), nullptr};
  auto recorded = AllowListedEnvironment(envp);
  EXPECT_EQ(recorded["OPENAI_BASE_URL"], "https://api.example/v1");
  EXPECT_EQ(recorded["PATH"], "/usr/bin");
}

TEST(SecretsTest, ApiKeyComesFromAFileOrTheEnvironment) {
  std::string dir = ::testing::TempDir() + "/trace_keys_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/key") << "  k-123  \nsecond line\n";
  std::ofstream(dir + "/empty") << "\n";
  setenv("TRACE_API_KEY", "from-env", 1);
  EXPECT_EQ(*ResolveApiKey(dir + "/key"), "k-123");
  EXPECT_EQ(*ResolveApiKey(""), "from-env");
  unsetenv("TRACE_API_KEY");
  EXPECT_EQ(*ResolveApiKey(""), "");
  auto empty = ResolveApiKey(dir + "/empty");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  auto missing = ResolveApiKey(dir + "/missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir + "/missing"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trace::recorder
