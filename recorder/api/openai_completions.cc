#include "recorder/api/openai_completions.h"

#include <limits>

#include "recorder/api/json_body.h"
#include "recorder/api/openai_common.h"
#include "recorder/api/request_fields.h"
#include "recorder/api/sse.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

// A token-id array: every element an integer in [0, 2^31).
bool IsTokenArray(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 ||
        x.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return false;
    }
  }
  return true;
}

// prompt: "text" | ["text"] | [id, ...] | [[id, ...]]. Several prompts in one request
// (OpenAI answers each as its own choice) are refused: n must be 1 here.
std::optional<ApiError> ParsePrompt(const json& p, CompletionRequest* req) {
  auto take_ids = [&](const json& ids) {
    for (const json& x : ids) req->prompt_token_ids.push_back(x.get<int32_t>());
    req->prompt_is_tokens = true;
  };
  if (p.is_string()) {
    req->prompt = p.get<std::string>();
    return std::nullopt;
  }
  if (IsTokenArray(p)) {
    take_ids(p);
    return std::nullopt;
  }
  if (p.is_array() && p.size() == 1) {
    if (p[0].is_string()) {
      req->prompt = p[0].get<std::string>();
      return std::nullopt;
    }
    if (IsTokenArray(p[0])) {
      take_ids(p[0]);
      return std::nullopt;
    }
  }
  if (p.is_array() && p.size() > 1 && (p[0].is_string() || p[0].is_array())) {
    return OutOfRange("prompt", "only one prompt per request is supported; got " +
                                    std::to_string(p.size()) + " (send one request each)");
  }
  return WrongType("prompt", "a string, an array of token ids, or a one-element array of either",
                   p);
}

json TextChunk(const CompletionResult& h, const std::string& text, const json& logprobs,
               const json& finish_reason) {
  return ChunkJson(
      h, "text_completion",
      {{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason}});
}

// {tokens, token_logprobs, top_logprobs, text_offset}; offsets count from `offset`.
json LegacyLogprobs(const std::vector<TokenLogprob>& lps, size_t offset) {
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.token);
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [tok, lp] : t.top) top[tok] = lp;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += t.token.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

class CompletionStream : public StreamEncoder {
 public:
  CompletionStream(const CompletionRequest& req, const CompletionResult& header)
      : header_(header), logprobs_(req.logprobs), usage_(req.include_usage_in_stream) {}

  std::string Begin() override { return ""; }

  std::string Text(const std::string& delta, const std::vector<TokenLogprob>& lps) override {
    return SseData(TextChunk(header_, delta, Logprobs(lps), nullptr));
  }

  std::string End(const CompletionResult& r, const std::string& rest,
                  const std::vector<TokenLogprob>& rest_logprobs) override {
    std::string out;
    if (!rest.empty() || (logprobs_ && !rest_logprobs.empty())) {
      out += SseData(TextChunk(header_, rest, Logprobs(rest_logprobs), nullptr));
    }
    return out + StreamTail(TextChunk(header_, "", nullptr, r.finish_reason),
                            TextChunk(header_, "", nullptr, nullptr), usage_, r);
  }

  std::string Error(const ApiError& e) override { return StreamError(e); }

 private:
  json Logprobs(const std::vector<TokenLogprob>& lps) {
    if (!logprobs_) return nullptr;
    json j = LegacyLogprobs(lps, token_offset_);
    for (const TokenLogprob& t : lps) token_offset_ += t.token.size();
    return j;
  }

  CompletionResult header_;
  bool logprobs_;
  bool usage_;
  size_t token_offset_ = 0;  // text_offset of the next token
};

}  // namespace

std::variant<CompletionRequest, ApiError> ParseLegacyCompletionRequest(std::string_view body_text) {
  CompletionRequest req;
  req.chat = false;
  auto parsed = ParseOpenAiBody(body_text, &req);
  if (auto* err = std::get_if<ApiError>(&parsed)) return *err;
  nlohmann::ordered_json ordered = std::move(std::get<nlohmann::ordered_json>(parsed));
  const json& body = req.raw;
  auto prompt = body.find("prompt");
  if (prompt == body.end()) return BadRequest("prompt", "'prompt' is required");
  if (auto err = ParsePrompt(*prompt, &req)) return *err;
  if (auto e = ParseOpenAiSampling(body, &req)) return *e;
  std::optional<ApiError> err;
  std::optional<int64_t> top_logprobs;
  // Legacy completions: logprobs is the number of top alternatives (OpenAI: at most 5).
  if (!IntField(body, "logprobs", &top_logprobs, &err)) return *err;
  if (top_logprobs) {
    if (*top_logprobs < 0 || *top_logprobs > 20) {
      return OutOfRange("logprobs", "'logprobs' must be between 0 and 20");
    }
    req.logprobs = true;
    req.top_logprobs = static_cast<int>(*top_logprobs);
  }
  req.raw_ordered = std::move(ordered);
  return req;
}

std::string CompletionBody(const CompletionResult& r, bool with_logprobs) {
  json choice = {{"index", 0}, {"text", r.text}, {"finish_reason", r.finish_reason}};
  choice["logprobs"] = with_logprobs ? LegacyLogprobs(r.logprobs, 0) : json(nullptr);
  return DumpJson(ResponseJson(r, "text_completion", std::move(choice)));
}

ResponseSummary ReadCompletionResponse(const json& body) {
  ResponseSummary s;
  s.id = StringOr(body, "id");
  s.model = StringOr(body, "model");
  const json& choice = FirstChoice(body);
  s.finish_reason = OpenAiFinishReason(StringOr(choice, "finish_reason"));
  s.text = StringOr(choice, "text");
  ReadOpenAiUsage(MemberOrNull(body, "usage"), &s);
  return s;
}

json FoldCompletionStream(std::string_view event_stream) {
  json out;
  std::string text;
  json finish_reason = nullptr;
  for (const SseEvent& e : ParseSse(event_stream)) {
    if (e.data == "[DONE]") continue;
    json chunk = ParseJsonOrDiscarded(e.data);
    if (!chunk.is_object()) continue;
    if (chunk.contains("error")) return chunk;
    if (out.is_null()) {
      out = {{"id", StringOr(chunk, "id")},
             {"object", "text_completion"},
             {"created", IntOr(chunk, "created")},
             {"model", StringOr(chunk, "model")}};
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) out["usage"] = chunk["usage"];
    if (chunk.contains("trace")) out["trace"] = chunk["trace"];
    const json& choice = FirstChoice(chunk);
    if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) {
      finish_reason = choice["finish_reason"];
    }
    text += StringOr(choice, "text");
  }
  if (out.is_null()) return out;
  out["choices"] = json::array(
      {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}});
  return out;
}

const WireFormat& OpenAiCompletionsFormat() {
  static const OpenAiFormat format(
      {kApiCompletions, "/v1/completions", "cmpl-", &ParseLegacyCompletionRequest,
       [](const CompletionRequest& req, const CompletionResult& r) {
         return CompletionBody(r, req.logprobs);
       },
       [](const CompletionRequest& req, const CompletionResult& h)
           -> std::unique_ptr<StreamEncoder> { return std::make_unique<CompletionStream>(req, h); },
       &ReadCompletionResponse, &FoldCompletionStream});
  return format;
}

}  // namespace trace::recorder
