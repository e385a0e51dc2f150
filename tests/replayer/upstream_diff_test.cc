// `trace diff` on runs recorded through `--upstream`: calls a hosted model answered carry no
// token ids, so they are compared by the request (the ids the upstream assigned, which come
// back in later requests, replaced by their place in the run) and by the answer. Two runs
// that asked the same things in the same order are the same even though every id differs;
// a different answer to the same request is a difference blamed on the hosted model, and a
// different request shows as a request diff.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replayer/diff.h"

namespace trace::replayer {
namespace {

using nlohmann::json;

// One upstream call: the request as sent, the answer's id, model and text.
proto::Event UpstreamCall(uint64_t seq, const json& request, const std::string& id,
                          const std::string& model, const std::string& text) {
  proto::Event e;
  e.set_seq(seq);
  proto::LlmCall* c = e.mutable_llm_call();
  c->set_api("openai.responses");
  c->set_endpoint("/v1/responses");
  c->set_upstream("http://127.0.0.1:9/v1");
  c->set_http_status(200);
  c->set_request_json(request.dump());
  json response = {{"id", id},
                   {"model", model},
                   {"output",
                    {{{"id", "msg_" + id},
                      {"type", "message"},
                      {"content", {{{"type", "output_text"}, {"text", text}}}}}}}};
  c->set_response_json(response.dump());
  c->set_output_text(text);
  c->set_finish_reason("stop");
  c->set_request_id(id);
  return e;
}

// A two-turn conversation: the second request continues the first answer by its id.
std::vector<proto::Event> Conversation(const std::string& id_prefix, const std::string& model,
                                       const std::string& second_input,
                                       const std::string& second_answer) {
  return {
      UpstreamCall(1, {{"model", "m"}, {"input", "My name is Ada."}}, id_prefix + "1", model,
                   "Hello Ada."),
      UpstreamCall(
          2, {{"model", "m"}, {"previous_response_id", id_prefix + "1"}, {"input", second_input}},
          id_prefix + "2", model, second_answer)};
}

RunDiff Diff(const std::vector<proto::Event>& a, const std::vector<proto::Event>& b) {
  proto::RunHeader header;
  auto d = DiffLoadedRuns(header, a, header, b, nullptr, DiffOptions{});
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? std::move(d).value() : RunDiff{};
}

TEST(UpstreamDiffTest, SameExchangesWithOtherIdsAreTheSame) {
  RunDiff d = Diff(Conversation("resp_a", "gpt-x", "What is my name?", "Ada."),
                   Conversation("resp_b", "gpt-x", "What is my name?", "Ada."));
  EXPECT_TRUE(d.identical()) << RenderDiffText(d);
  EXPECT_TRUE(d.calls.empty());
}

TEST(UpstreamDiffTest, ADifferentAnswerToTheSameRequestIsBlamedOnTheHostedModel) {
  RunDiff d = Diff(Conversation("resp_a", "gpt-x", "What is my name?", "Ada."),
                   Conversation("resp_b", "gpt-x", "What is my name?", "Grace."));
  EXPECT_FALSE(d.identical());
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].call, 2);
  EXPECT_TRUE(d.calls[0].answers_differ);
  EXPECT_TRUE(d.calls[0].request_diff.empty()) << d.calls[0].request_diff;
  EXPECT_NE(RenderDiffText(d).find("same request to the upstream"), std::string::npos)
      << RenderDiffText(d);
  // The upstream said it was another model: that is named as the source.
  RunDiff versions = Diff(Conversation("resp_a", "gpt-x-0601", "What is my name?", "Ada."),
                          Conversation("resp_b", "gpt-x-0802", "What is my name?", "Grace."));
  ASSERT_EQ(versions.calls.size(), 1u);
  EXPECT_EQ(versions.calls[0].response_model_a, "gpt-x-0601");
  EXPECT_EQ(versions.calls[0].response_model_b, "gpt-x-0802");
  EXPECT_NE(RenderDiffText(versions).find("gpt-x-0601 vs gpt-x-0802"), std::string::npos)
      << RenderDiffText(versions);
}

TEST(UpstreamDiffTest, ADifferentRequestShowsAsARequestDiff) {
  RunDiff d = Diff(Conversation("resp_a", "gpt-x", "What is my name?", "Ada."),
                   Conversation("resp_b", "gpt-x", "Who am I?", "Ada."));
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_NE(d.calls[0].request_diff.find("What is my name?"), std::string::npos);
  EXPECT_NE(d.calls[0].request_diff.find("Who am I?"), std::string::npos);
  // The id of the earlier answer compares by place, so it is not part of the difference.
  EXPECT_EQ(d.calls[0].request_diff.find("resp_a1"), std::string::npos) << d.calls[0].request_diff;
  EXPECT_FALSE(d.calls[0].answers_differ);
}

TEST(UpstreamDiffTest, AnAnswerNestedAMillionLevelsDeepIsComparedWithoutCrashing) {
  // An upstream's answer is recorded as it arrived, however deep it nests; the diff's walks
  // over it recurse, so what they see is cut at the depth limit while parsing.
  std::vector<proto::Event> a = Conversation("resp_a", "gpt-x", "What is my name?", "Ada.");
  std::vector<proto::Event> b = Conversation("resp_b", "gpt-x", "What is my name?", "Ada.");
  auto deep = [](const std::string& id) {
    return "{\"id\": \"" + id + "\", \"x\": " + std::string(1'000'000, '[') +
           std::string(1'000'000, ']') + "}";
  };
  a[0].mutable_llm_call()->set_response_json(deep("resp_a1"));
  b[0].mutable_llm_call()->set_response_json(deep("resp_b1"));
  RunDiff d = Diff(a, b);
  EXPECT_TRUE(d.calls.empty()) << RenderDiffText(d);
}

}  // namespace
}  // namespace trace::replayer
