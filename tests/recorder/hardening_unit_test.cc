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

// The count of values and keys, what it names, and the text it adds up, on small texts.
TEST(JsonScanTest, CountsValuesAndKeysAndTheirText) {
  JsonScan s = ScanJson(R"({"a": [1, -2.5e3, true, null, "x"], "b": {"c": "\u00e9\n"}})");
  EXPECT_EQ(s.excess, JsonScan::Excess::kNone);
  // {}, a, [], 1, -2.5e3, true, null, "x", b, {}, c, "\u00e9\n"
  EXPECT_EQ(s.values, 12u);
  // a, x, b, c: 1 byte each; "\u00e9\n" at least 2 (its escapes count one byte each).
  EXPECT_EQ(s.string_bytes, 6u);
  // The value one over the limit, and the top-level member it is in.
  s = ScanJson(R"({"model": "m", "messages": [1, 2, 3, 4]})", kMaxJsonDepth, 5);
  EXPECT_EQ(s.excess, JsonScan::Excess::kValues);
  EXPECT_EQ(s.offset, 28u);  // the first element of "messages", the 6th value
  EXPECT_EQ(s.field, "messages");
  ApiError e = JsonTooManyValues("request body", s);
  EXPECT_EQ(e.http_status, 413);
  EXPECT_EQ(e.code, "too_many_json_values");
  EXPECT_EQ(e.param, "messages");
  EXPECT_NE(e.message.find("more than 5 JSON values"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("in 'messages'"), std::string::npos) << e.message;
  // Depth still comes first where it is passed first.
  s = ScanJson("[[[1]]]", 2, 100);
  EXPECT_EQ(s.excess, JsonScan::Excess::kDepth);
  EXPECT_EQ(s.offset, 2u);
}

// Tool-call arguments sent as JSON text are parsed on their own (the chat template, the
// event API), so their values count as the body's: a 1 MB string of tiny values cost
// 300 MB once parsed and converted for the template. A key spelled with escapes is the
// same key; arguments nested too deep stay text and count nothing.
TEST(JsonScanTest, ValuesInsideToolCallArgumentsCount) {
  std::string tiny = "[";
  for (int i = 0; i < 100'000; ++i) tiny += i == 0 ? "1" : ",1";
  tiny += "]";
  for (const char* key : {"arguments", "argument\\u0073", "\\u0061rguments"}) {
    const std::string body = std::string(R"({"messages": [{"tool_calls": [{"function": {")") + key +
                             R"(": )" + json(tiny).dump() + "}}]}]}";
    const JsonScan s = ScanJson(body);
    EXPECT_EQ(s.excess, JsonScan::Excess::kNone) << key;
    EXPECT_EQ(s.values, 11u + 100'001u) << key;  // the body's 11 and the array's
    const JsonScan capped = ScanJson(body, kMaxJsonDepth, 50'000);
    EXPECT_EQ(capped.excess, JsonScan::Excess::kValues) << key;
    EXPECT_EQ(capped.field, "messages") << key;
  }
  // The same text under another key is one string.
  EXPECT_EQ(ScanJson(R"({"content": )" + json(tiny).dump() + "}").values, 3u);
  // Too deep to be parsed: counted as one string.
  const std::string deep = json(std::string(300, '[') + std::string(300, ']')).dump();
  EXPECT_EQ(ScanJson(R"({"arguments": )" + deep + "}").values, 3u);
  // A key that only looks like it.
  EXPECT_EQ(ScanJson(R"({"arguments2": )" + json(tiny).dump() + "}").values, 3u);
}

// A long agent conversation stays far below the limits: 5,000 messages (user turns,
// assistant turns calling tools, tool results of a few hundred bytes) and 100 tool
// schemas, 3.3 MB, hold 62,859 values and keys (a quarter of the limit).
TEST(JsonScanTest, ALongAgentConversationIsFarBelowTheLimit) {
  std::mt19937 rng(40);
  json tools = json::array();
  for (int t = 0; t < 100; ++t) {
    json props = json::object();
    for (int p = 0; p < 5; ++p) {
      props["arg" + std::to_string(p)] = {{"type", p % 2 ? "integer" : "string"},
                                          {"description", "argument " + std::to_string(p)}};
    }
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", "tool_" + std::to_string(t)},
                       {"description", "Does thing number " + std::to_string(t)},
                       {"parameters", {{"type", "object"}, {"properties", props}}}}}});
  }
  json messages = json::array({{{"role", "system"}, {"content", "You are an agent."}}});
  int calls = 0;
  while (messages.size() < 5000) {
    messages.push_back({{"role", "user"}, {"content", std::string(400 + rng() % 800, 'u')}});
    const std::string id = "call_" + std::to_string(calls++);
    messages.push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", id},
            {"type", "function"},
            {"function",
             {{"name", "tool_" + std::to_string(rng() % 100)},
              {"arguments", json{{"arg0", "value"}, {"arg1", int(rng() % 1000)}}.dump()}}}}}}});
    messages.push_back(
        {{"role", "tool"}, {"tool_call_id", id}, {"content", std::string(900, 'r')}});
  }
  const std::string body =
      json{{"model", "m"}, {"messages", messages}, {"tools", tools}, {"max_tokens", 1}}.dump();
  const JsonScan s = ScanJson(body);
  EXPECT_EQ(s.excess, JsonScan::Excess::kNone);
  EXPECT_GT(body.size(), size_t{3} << 20);
  EXPECT_LT(s.values, kMaxJsonValues / 3) << s.values;
  auto r = ParseCompletionRequest(body, /*chat=*/true);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r)) << std::get<ApiError>(r).message;
  EXPECT_EQ(std::get<CompletionRequest>(r).messages.size(), messages.size());
}

// Every request parser refuses a body of more values than the limit before building it.
TEST(JsonScanTest, TooManyValuesAreA413InEveryParser) {
  std::string ones = "[1";
  for (size_t i = 1; i <= kMaxJsonValues; ++i) ones += ",1";
  ones += "]";
  const std::string body =
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": )" + ones + "}";
  for (const WireFormat* f : {&OpenAiChatFormat(), &OpenAiCompletionsFormat(),
                              &OpenAiResponsesFormat(), &AnthropicMessagesFormat()}) {
    auto r = f->Parse(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << f->api();
    EXPECT_EQ(std::get<ApiError>(r).http_status, 413) << f->api();
    EXPECT_EQ(std::get<ApiError>(r).code, "too_many_json_values") << f->api();
    EXPECT_EQ(std::get<ApiError>(r).param, "x") << f->api();
  }
  auto plain = ParseJsonBody(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(plain));
  EXPECT_EQ(std::get<ApiError>(plain).code, "too_many_json_values");
  EXPECT_NE(std::get<ApiError>(plain).message.find("more than 250000 JSON values and object keys"),
            std::string::npos)
      << std::get<ApiError>(plain).message;
}

// nlohmann's lexer takes a NUL byte for the end of the input: a valid body followed by a
// NUL and anything at all was accepted as that body. The APIs answer 400; so does every
// parser here, and JSON inside values (tool-call arguments) is no JSON either.
TEST(JsonNulTest, ABodyFollowedByANulAndJunkIsNotJson) {
  const std::string messages = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],)"
                               R"( "max_tokens": 1})";
  const std::string prompt = R"({"model": "m", "prompt": "hi", "max_tokens": 1})";
  const std::string input = R"({"model": "m", "input": "hi"})";
  for (const std::string& junk :
       {std::string("\0junk", 5), std::string("\0", 1), std::string("\0{\"a\": 1}", 9)}) {
    const std::string body = messages + junk;
    for (const auto& [f, good] : std::vector<std::pair<const WireFormat*, std::string>>{
             {&OpenAiChatFormat(), messages},
             {&OpenAiCompletionsFormat(), prompt},
             {&OpenAiResponsesFormat(), input},
             {&AnthropicMessagesFormat(), messages}}) {
      ASSERT_TRUE(std::holds_alternative<CompletionRequest>(f->Parse(good))) << f->api();
      auto r = f->Parse(good + junk);
      ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << f->api();
      EXPECT_EQ(std::get<ApiError>(r).http_status, 400) << f->api();
      EXPECT_EQ(std::get<ApiError>(r).code, "invalid_json") << f->api();
    }
    auto plain = ParseJsonBody(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(plain));
    EXPECT_EQ(std::get<ApiError>(plain).code, "invalid_json");
    EXPECT_TRUE(std::holds_alternative<ApiError>(ParseJsonBodyOrdered(body)));
    EXPECT_TRUE(ParseJsonOrDiscarded(body).is_discarded());
    EXPECT_TRUE(ParseOrderedJsonOrDiscarded(body).is_discarded());
  }
  // A NUL inside a string is no better (control characters must be escaped).
  EXPECT_TRUE(ParseJsonOrDiscarded(std::string("\"a\0b\"", 5)).is_discarded());
  EXPECT_EQ(ParseJsonOrDiscarded("\"a\\u0000b\"").get<std::string>(), std::string("a\0b", 3));
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
