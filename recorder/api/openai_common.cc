#include "recorder/api/openai_common.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/escape.h"
#include "base/json_print.h"
#include "recorder/api/json_body.h"
#include "recorder/api/request_fields.h"

namespace trace::recorder {

using nlohmann::json;

std::variant<nlohmann::ordered_json, ApiError> ParseOpenAiBody(std::string_view body_text,
                                                               CompletionRequest* req,
                                                               bool legacy_functions) {
  // Parsed once keeping the client's key order (for what the chat template sees and what
  // schemas say) and converted for validation, which does not depend on key order. The
  // depth limit (json_body.h) makes the conversion safe.
  auto parsed = ParseJsonBodyOrdered(body_text);
  if (auto* err = std::get_if<ApiError>(&parsed)) return *err;
  nlohmann::ordered_json ordered = std::move(std::get<nlohmann::ordered_json>(parsed));
  json body = ordered;
  if (!body.is_object()) return WrongType("body", "a JSON object", body);
  auto model = body.find("model");
  if (model == body.end() || !model->is_string()) {
    return BadRequest("model", "'model' must be a string naming a served model (GET /v1/models)");
  }
  req->model = model->get<std::string>();
  if (auto err = RejectUnsupportedFields(body, legacy_functions)) return *err;
  req->raw = std::move(body);
  return ordered;
}

std::optional<ApiError> RejectUnsupportedFields(const json& body, bool legacy_functions) {
  if (auto f = body.find("functions"); !legacy_functions && f != body.end() && !f->is_null()) {
    return BadRequest("functions",
                      "'functions' (Chat Completions' deprecated spelling) is not part of this "
                      "API; send 'tools' with {\"type\": \"function\", ...} entries");
  }
  if (auto f = body.find("function_call"); !legacy_functions && f != body.end() && !f->is_null()) {
    return BadRequest("function_call",
                      "'function_call' (Chat Completions' deprecated spelling) is not part of "
                      "this API; use 'tool_choice'");
  }
  if (auto b = body.find("best_of"); b != body.end() && !b->is_null()) {
    if (!b->is_number_integer() || b->get<int64_t>() != 1) {
      return OutOfRange("best_of", "only best_of = 1 is supported");
    }
  }
  if (auto e = body.find("echo"); e != body.end() && e->is_boolean() && e->get<bool>()) {
    return OutOfRange("echo", "'echo' is not supported");
  }
  if (auto s = body.find("suffix");
      s != body.end() && s->is_string() && !s->get<std::string>().empty()) {
    return OutOfRange("suffix", "'suffix' (insertion) is not supported");
  }
  return std::nullopt;
}

namespace {

// OpenAI's limit on logit_bias entries.
constexpr size_t kMaxLogitBias = 300;

// frequency_penalty, presence_penalty (numbers in [-2, 2]) and logit_bias (an object of at
// most 300 entries mapping a token id, a decimal string, to a number in [-100, 100]) into
// req->sampling; null is absent. Ids past the model's vocabulary are accepted and ignored
// by the sampler (engine/sampler.h): the vocabulary is not known here.
std::optional<ApiError> ParsePenalties(const json& body, CompletionRequest* req) {
  std::optional<ApiError> err;
  std::optional<double> frequency, presence;
  if (!NumberField(body, "frequency_penalty", &frequency, &err) ||
      !NumberField(body, "presence_penalty", &presence, &err)) {
    return err;
  }
  for (auto [key, value, out] :
       {std::tuple{"frequency_penalty", frequency, &req->sampling.frequency_penalty},
        std::tuple{"presence_penalty", presence, &req->sampling.presence_penalty}}) {
    if (!value) continue;
    if (!(*value >= -2.0 && *value <= 2.0)) {
      ApiError e = OutOfRange(
          key, "'" + std::string(key) + "' must be between -2 and 2, got " + json(*value).dump());
      e.code = *value > 2.0 ? "decimal_above_max_value" : "decimal_below_min_value";
      return e;
    }
    *out = static_cast<float>(*value);
  }
  auto lb = body.find("logit_bias");
  if (lb == body.end() || lb->is_null()) return std::nullopt;
  if (!lb->is_object()) return WrongType("logit_bias", "an object", *lb);
  if (lb->size() > kMaxLogitBias) {
    return OutOfRange("logit_bias", "'logit_bias' may hold at most 300 entries, got " +
                                        std::to_string(lb->size()));
  }
  std::vector<std::pair<int32_t, float>> bias;
  for (auto it = lb->begin(); it != lb->end(); ++it) {
    const std::string& key = it.key();
    // A canonical non-negative decimal within int32: "7", not "07", "+7", "-1" or "7.0".
    bool digits = !key.empty() && key.size() <= 10 && (key == "0" || key[0] != '0') &&
                  std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoll(key) > std::numeric_limits<int32_t>::max()) {
      return BadRequest("logit_bias",
                        "'logit_bias' keys must be token ids (non-negative "
                        "integers as strings), got \"" +
                            EscapeForDisplay(key) + "\"");
    }
    const std::string path = "logit_bias." + key;
    if (!it->is_number()) return WrongType(path, "a number", *it);
    const double v = it->get<double>();
    if (!(v >= -100.0 && v <= 100.0)) {
      return OutOfRange(path, "'" + path + "' must be between -100 and 100, got " + json(v).dump());
    }
    bias.emplace_back(static_cast<int32_t>(std::stoll(key)), static_cast<float>(v));
  }
  // JSON object keys are unique and "7" has one spelling, so the ids are unique; the
  // sampler wants them ascending.
  std::sort(bias.begin(), bias.end());
  req->sampling.logit_bias = std::move(bias);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseOpenAiSampling(const json& body, CompletionRequest* req) {
  if (auto e = ParsePenalties(body, req)) return e;
  std::optional<ApiError> err;
  std::optional<int64_t> max_tokens, max_completion_tokens, n;
  if (!IntField(body, "max_tokens", &max_tokens, &err) ||
      !IntField(body, "max_completion_tokens", &max_completion_tokens, &err) ||
      !IntField(body, "n", &n, &err) || !BoolField(body, "stream", &req->stream, &err)) {
    return *err;
  }
  if (n && *n != 1) return OutOfRange("n", "only n = 1 is supported");
  // OpenAI: temperature 0 to 2.
  if (auto e = ParseSamplingCore(body, 2.0, req)) return e;
  req->max_tokens_given = max_completion_tokens.has_value() || max_tokens.has_value();
  // max_completion_tokens wins (OpenAI deprecated max_tokens for chat); either is clamped
  // to what the context leaves, here to int32 and later to the model's context.
  std::optional<int64_t> limit = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (limit) {
    if (*limit < 1) {
      return OutOfRange(
          max_completion_tokens ? "max_completion_tokens" : "max_tokens",
          "the token limit must be a positive integer, got " + std::to_string(*limit));
    }
    req->sampling.max_tokens =
        static_cast<int32_t>(std::min<int64_t>(*limit, std::numeric_limits<int32_t>::max()));
  } else {
    req->sampling.max_tokens = kDefaultMaxTokens;
  }
  if (auto stop = body.find("stop"); stop != body.end() && !stop->is_null()) {
    if (stop->is_string()) {
      if (!stop->get<std::string>().empty()) req->sampling.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 4) {
      for (const json& s : *stop) {
        if (!s.is_string() || s.get<std::string>().empty()) {
          return BadRequest("stop", "'stop' entries must be non-empty strings");
        }
        req->sampling.stop.push_back(s.get<std::string>());
      }
    } else {
      return BadRequest("stop", "'stop' must be a string or an array of up to 4 strings");
    }
  }
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return WrongType("stream_options", "an object", *so);
    if (!req->stream) {
      return BadRequest("stream_options", "'stream_options' is only allowed with 'stream': true");
    }
    if (!BoolField(*so, "include_usage", &req->include_usage_in_stream, &err)) return *err;
  }
  if (auto gc = body.find("guided_choice"); gc != body.end() && !gc->is_null()) {
    if (!gc->is_array() || gc->empty()) {
      return BadRequest("guided_choice", "'guided_choice' must be a non-empty array of strings");
    }
    for (const json& s : *gc) {
      if (!s.is_string() || s.get<std::string>().empty()) {
        return BadRequest("guided_choice", "'guided_choice' entries must be non-empty strings");
      }
      req->guided_choice.push_back(s.get<std::string>());
    }
  }
  return std::nullopt;
}

json UsageJson(const CompletionResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_prompt_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", 0}}}};
}

json ChunkJson(const CompletionResult& h, const char* object, json choice) {
  return {{"id", h.id},
          {"object", object},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", h.system_fingerprint},
          {"choices", json::array({std::move(choice)})}};
}

json ResponseJson(const CompletionResult& r, const char* object, json choice) {
  json body = ChunkJson(r, object, std::move(choice));
  body["usage"] = UsageJson(r);
  body["trace"] = TraceExtension(r);
  return body;
}

json TraceExtension(const CompletionResult& r) {
  json digests = json::array();
  for (uint64_t d : r.logits_digests) {
    char buf[17];
    snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(d));
    digests.push_back(buf);
  }
  return {{"call_index", r.call_index},
          {"seed", r.seed},
          {"token_ids", r.token_ids},
          {"logits_digests", digests},
          {"cached_prompt_tokens", r.cached_prompt_tokens}};
}

json LogprobsContent(const std::vector<TokenLogprob>& logprobs) {
  json content = json::array();
  for (const TokenLogprob& t : logprobs) {
    json top = json::array();
    for (const auto& [tok, lp] : t.top) {
      top.push_back({{"token", tok}, {"logprob", lp}, {"bytes", BytesJson(tok)}});
    }
    content.push_back({{"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", BytesJson(t.token)},
                       {"top_logprobs", top}});
  }
  return content;
}

json BytesJson(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

std::string DumpJson(const json& j) {
  return JsonText(j);
}

std::string StreamTail(json last, json usage_chunk, bool with_usage, const CompletionResult& r) {
  last["trace"] = TraceExtension(r);
  std::string out = SseData(last);
  if (with_usage) {
    usage_chunk["choices"] = json::array();
    usage_chunk["usage"] = UsageJson(r);
    out += SseData(usage_chunk);
  }
  out += kSseDone;
  return out;
}

std::string StreamError(const ApiError& e) {
  return "data: " + e.Body() + "\n\n" + std::string(kSseDone);
}

std::string SseData(const json& chunk) {
  return "data: " + DumpJson(chunk) + "\n\n";
}

void ReadOpenAiUsage(const json& usage, ResponseSummary* s) {
  if (!usage.is_object()) return;
  s->has_usage = true;
  s->input_tokens = IntOr(usage, "prompt_tokens");
  s->output_tokens = IntOr(usage, "completion_tokens");
  s->cached_input_tokens = IntOr(MemberOrNull(usage, "prompt_tokens_details"), "cached_tokens");
}

const json& FirstChoice(const json& body) {
  static const json kNull;
  const json& choices = MemberOrNull(body, "choices");
  return choices.is_array() && !choices.empty() && choices[0].is_object() ? choices[0] : kNull;
}

std::string OpenAiFinishReason(const std::string& reason) {
  return reason == "function_call" ? "tool_calls" : reason;
}

}  // namespace trace::recorder
