// A forced tool call cut by the token limit at every length from 1 to 128 tokens, in each
// API that has tools (Chat Completions, Responses, Anthropic Messages), streamed and not:
// no wrapper text (<tool_call>, a piece of it, a closing brace of the wrapper) anywhere in
// the answer; the calls the limit did not reach are the uncut answer's calls, complete
// (Responses: status "completed"); the cut call's arguments are a prefix of the uncut
// call's JSON (Anthropic: its input is {} until the object is complete, as documented in
// docs/recorder.md); and the streamed answer says what the non-streamed one says.
//
// In-process server with the demo model at temperature 0: the answer to a limit of n tokens
// is the first n tokens of the uncut answer, so the uncut answer is the reference.
#include <future>

#include "recorder/api/anthropic_messages.h"
#include "recorder/api/openai_chat.h"
#include "recorder/api/openai_responses.h"
#include "tests/recorder/server_fixture.h"

namespace trace::recorder {
namespace {

using namespace testing;  // NOLINT: the fixture
using nlohmann::json;

constexpr int kMaxLimit = 128;
// The reference answer's limit: past kMaxLimit, so that every call a cut answer reaches is
// complete in it (the demo model keeps calling the tool until the limit).
constexpr int kReferenceLimit = kMaxLimit + 64;

// One tool with a short, closed argument object, so that each call is a few dozen tokens and
// the uncut answer holds several calls (the demo model keeps calling it in parallel).
json Schema() {
  return json::parse(R"({"type": "object", "properties": {"u": {"enum": ["c", "f"]}},
                         "required": ["u"], "additionalProperties": false})");
}

struct Api {
  std::string name;
  const WireFormat* format;
  std::string path;
  httplib::Headers headers;
  json (*body)(int limit);
};

json ChatBody(int limit) {
  return {
      {"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "w"}, {"parameters", Schema()}}}}}},
      {"tool_choice", "required"},
      {"temperature", 0},
      {"max_tokens", limit}};
}

json ResponsesBody(int limit) {
  return {{"input", "Weather?"},
          {"tools",
           {{{"type", "function"}, {"name", "w"}, {"parameters", Schema()}, {"strict", false}}}},
          {"tool_choice", "required"},
          {"temperature", 0},
          {"store", false},
          {"max_output_tokens", limit}};
}

json AnthropicBody(int limit) {
  return {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
          {"tools", {{{"name", "w"}, {"input_schema", Schema()}}}},
          {"tool_choice", {{"type", "any"}}},
          {"temperature", 0},
          {"max_tokens", limit}};
}

std::vector<Api> Apis() {
  const httplib::Headers openai = {{"Authorization", std::string("Bearer ") + kKey}};
  return {
      {"chat", &OpenAiChatFormat(), "/v1/chat/completions", openai, &ChatBody},
      {"responses", &OpenAiResponsesFormat(), "/v1/responses", openai, &ResponsesBody},
      {"anthropic",
       &AnthropicMessagesFormat(),
       "/v1/messages",
       {{"x-api-key", kKey}, {"anthropic-version", "2023-06-01"}},
       &AnthropicBody},
  };
}

// What one answer says, in the internal vocabulary, plus each Responses output item's type
// and status.
struct Answer {
  std::string raw;  // the body or the event stream as received
  ResponseSummary summary;
  std::vector<std::pair<std::string, std::string>> items;
};

Answer Ask(const Server& server, const Api& api, int limit, bool stream) {
  json body = api.body(limit);
  body["model"] = server.model_name();
  body["stream"] = stream;
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(600, 0);
  auto r = c.Post(api.path.c_str(), api.headers, body.dump(), "application/json");
  Answer a;
  if (!r) {
    ADD_FAILURE() << api.name << " limit " << limit << ": " << httplib::to_string(r.error());
    return a;
  }
  EXPECT_EQ(r->status, 200) << api.name << " limit " << limit << ": " << r->body;
  a.raw = r->body;
  json parsed = stream ? api.format->FoldStream(r->body) : json::parse(r->body);
  a.summary = api.format->ReadResponse(parsed);
  if (parsed.contains("output")) {
    for (const json& item : parsed["output"]) a.items.emplace_back(item["type"], item["status"]);
  }
  return a;
}

std::string Describe(const Answer& a) {
  std::string out = "finish " + a.summary.finish_reason + ", text \"" + a.summary.text + "\"";
  for (const ToolCall& c : a.summary.tool_calls) out += ", " + c.name + "(" + c.arguments + ")";
  return out;
}

// The checks of one cut answer against the uncut one.
void CheckCut(const Api& api, int limit, const Answer& cut, const Answer& full) {
  SCOPED_TRACE(api.name + " limit " + std::to_string(limit) + ": " + Describe(cut));
  // Nothing of the wrapper: the answer's only text would be model output, and there is none.
  EXPECT_EQ(cut.raw.find('<'), std::string::npos) << cut.raw;
  EXPECT_EQ(cut.summary.text, "");
  const auto& calls = cut.summary.tool_calls;
  const auto& want = full.summary.tool_calls;
  ASSERT_LE(calls.size(), want.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].name, want[i].name);
    const bool last = i + 1 == calls.size();
    if (api.name == "anthropic") {
      // A tool_use input is an object: {} until the cut call's object is complete.
      json got = json::parse(calls[i].arguments);
      if (!last || got != json::object()) EXPECT_EQ(got, json::parse(want[i].arguments));
    } else if (!last) {
      EXPECT_EQ(calls[i].arguments, want[i].arguments);
    } else {
      EXPECT_EQ(want[i].arguments.substr(0, calls[i].arguments.size()), calls[i].arguments);
    }
  }
  if (api.name != "responses") return;
  // Each item's status: completed unless the limit cut it.
  for (size_t i = 0; i < cut.items.size(); ++i) {
    const auto& [type, status] = cut.items[i];
    if (type != "function_call") continue;
    const size_t call = i - (cut.items.size() - calls.size());
    const bool complete = calls[call].arguments == want[call].arguments;
    EXPECT_EQ(status, complete ? "completed" : "incomplete") << "item " << i;
  }
}

void CheckStreamSaysTheSame(const Api& api, int limit, const Answer& plain,
                            const Answer& streamed) {
  SCOPED_TRACE(api.name + " limit " + std::to_string(limit));
  EXPECT_EQ(streamed.raw.find('<'), std::string::npos) << streamed.raw;
  EXPECT_EQ(Describe(streamed), Describe(plain));
  EXPECT_EQ(streamed.items, plain.items);
}

TEST_F(ServerTest, ForcedToolCallsCutAtEveryLimitKeepNoWrapperText) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  for (const Api& api : Apis()) {
    const Answer full = Ask(*server, api, kReferenceLimit, false);
    ASSERT_GE(full.summary.tool_calls.size(), 3u) << api.name << ": " << Describe(full);
    // Its calls are well-formed, complete calls (the last one may be cut).
    for (size_t i = 0; i + 1 < full.summary.tool_calls.size(); ++i) {
      EXPECT_EQ(full.summary.tool_calls[i].name, "w");
      EXPECT_TRUE(json::accept(full.summary.tool_calls[i].arguments));
    }
    // Streamed and not, side by side: the scheduler runs them as one batch.
    for (int limit = 1; limit <= kMaxLimit; ++limit) {
      auto streamed =
          std::async(std::launch::async, [&] { return Ask(*server, api, limit, true); });
      const Answer plain = Ask(*server, api, limit, false);
      CheckCut(api, limit, plain, full);
      CheckStreamSaysTheSame(api, limit, plain, streamed.get());
    }
  }
}

}  // namespace
}  // namespace trace::recorder
