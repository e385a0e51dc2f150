// Helpers shared by the store tests, the store CLI tests and the store benchmark:
// temporary directories, every-field event builders and a realistic conversation.
//
// Ownership: values only. Thread safety: functions are reentrant except TempDir's
// constructor/destructor, which touch the file system. Errors: failures abort the test
// through gtest assertions in the caller.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "proto/llm_call_tokens.h"
#include "proto/trace.pb.h"
#include "testkit/temp_dir.h"

namespace trace::store::testing {

using ::trace::testing::TempDir;

// Sets every field of `msg` (recursively, one level of sub-messages per field) to a
// value derived from `salt` and the field number, so a lost or swapped field shows.
// Strings of fields with odd numbers are long (>= 300 bytes) so they go through the blob
// table; repeated fields get `repeat` elements. Oneofs end with their last member set.
inline void FillAllFields(google::protobuf::Message* msg, int salt, int repeat = 3, int depth = 0) {
  using google::protobuf::FieldDescriptor;
  const auto* desc = msg->GetDescriptor();
  const auto* refl = msg->GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    const int n = f->number();
    auto str = [&](int k) {
      std::string s = f->name() + "#" + std::to_string(salt) + "." + std::to_string(k);
      if (n % 2 == 1) {
        while (s.size() < 300) s += " " + f->full_name() + std::to_string(s.size() * salt);
      }
      return s;
    };
    const int count = f->is_repeated() ? repeat : 1;
    for (int k = 0; k < count; ++k) {
      const int64_t v = int64_t{salt} * 1000 + n * 10 + k + 1;
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          f->is_repeated() ? refl->AddInt32(msg, f, static_cast<int32_t>(v))
                           : refl->SetInt32(msg, f, static_cast<int32_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          f->is_repeated() ? refl->AddInt64(msg, f, v * 1000003)
                           : refl->SetInt64(msg, f, v * 1000003);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          f->is_repeated() ? refl->AddUInt32(msg, f, static_cast<uint32_t>(v))
                           : refl->SetUInt32(msg, f, static_cast<uint32_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_UINT64: {
          uint64_t u = static_cast<uint64_t>(v) * 0x9E3779B97F4A7C15ull;
          f->is_repeated() ? refl->AddUInt64(msg, f, u) : refl->SetUInt64(msg, f, u);
          break;
        }
        case FieldDescriptor::CPPTYPE_DOUBLE:
          f->is_repeated() ? refl->AddDouble(msg, f, v + 0.25) : refl->SetDouble(msg, f, v + 0.25);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          f->is_repeated() ? refl->AddFloat(msg, f, static_cast<float>(v) / 7.0f)
                           : refl->SetFloat(msg, f, static_cast<float>(v) / 7.0f);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          f->is_repeated() ? refl->AddBool(msg, f, true) : refl->SetBool(msg, f, true);
          break;
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* e = f->enum_type();
          const auto* value = e->value(e->value_count() - 1 - (k % e->value_count()));
          f->is_repeated() ? refl->AddEnum(msg, f, value) : refl->SetEnum(msg, f, value);
          break;
        }
        case FieldDescriptor::CPPTYPE_STRING:
          f->is_repeated() ? refl->AddString(msg, f, str(k)) : refl->SetString(msg, f, str(k));
          break;
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth < 3) {
            auto* sub = f->is_repeated() ? refl->AddMessage(msg, f) : refl->MutableMessage(msg, f);
            FillAllFields(sub, salt + k + 1, repeat, depth + 1);
          }
          break;
      }
    }
  }
}

// An event of the given kind with every field set; LlmCall arrays are consistent
// (`tokens` sampled tokens, 2 layer digests and a route of 2 experts each).
inline proto::Event MakeFullEvent(proto::Event::KindCase kind, int salt, int tokens = 5) {
  proto::Event e;
  const auto* f = proto::Event::descriptor()->FindFieldByNumber(static_cast<int>(kind));
  auto* sub = e.GetReflection()->MutableMessage(&e, f);
  FillAllFields(sub, salt);
  if (kind == proto::Event::kLlmCall) {
    auto* c = e.mutable_llm_call();
    proto::ClearSampledTokenArrays(c);
    c->set_num_layers(2);
    c->set_route_width(2);
    std::mt19937_64 rng(salt);
    for (int t = 0; t < tokens; ++t) {
      c->add_token_ids(static_cast<int32_t>(rng() % 151936));
      c->add_logits_digests(rng());
      c->add_logits(static_cast<float>(rng() % 4000) / 100.0f);
      c->add_logprobs(-static_cast<float>(rng() % 1000) / 300.0f);
      c->add_runner_up_ids(static_cast<int32_t>(rng() % 151936));
      c->add_runner_up_logits(static_cast<float>(rng() % 4000) / 100.0f);
      c->add_layer_digests(rng());
      c->add_layer_digests(rng());
      c->add_route_ids(static_cast<int32_t>(rng() % 128));
      c->add_route_ids(t % 3 == 0 ? -1 : static_cast<int32_t>(rng() % 128));
    }
    c->clear_prompt_token_ids();
    for (int t = 0; t < 40 + salt; ++t) c->add_prompt_token_ids((t * 7919 + salt) % 151936);
  }
  e.set_wall_time_ns(1'700'000'000'000'000'000 + salt);
  return e;
}

inline proto::RunHeader MakeFullHeader(int salt) {
  proto::RunHeader h;
  FillAllFields(&h, salt);
  h.clear_run_id();
  h.mutable_env()->clear();
  (*h.mutable_env())["PATH"] = "/usr/bin:/bin";
  (*h.mutable_env())["LANG"] = "C.UTF-8";
  h.mutable_attributes()->clear();
  (*h.mutable_attributes())["k"] = "v";
  return h;
}

// A realistic chat agent: a system prompt, `turns` user/assistant turns; call t (0-based)
// carries the whole history so far, as request JSON, rendered prompt and token ids, and
// samples `out_tokens` tokens with per-token digests and logits.
struct Conversation {
  std::vector<proto::Event> calls;
};

inline Conversation MakeConversation(int turns, int out_tokens = 120, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  auto words = [&](int n) {
    static const char* kWords[] = {
        "the",   "tool",   "returned", "record", "customer", "id",      "please", "delete", "check",
        "order", "status", "shipping", "refund", "account",  "invoice", "date",   "with",   "and"};
    std::string s;
    for (int i = 0; i < n; ++i) s += std::string(i ? " " : "") + kWords[rng() % 18];
    return s;
  };
  const std::string system =
      "You are a support agent. Tools: lookup_order(id), "
      "refund(id, amount), delete_record(id). " +
      words(120);
  std::vector<std::pair<std::string, std::string>> messages = {{"system", system}};
  std::vector<int32_t> prompt_ids;
  for (int i = 0; i < 300; ++i) prompt_ids.push_back(static_cast<int32_t>(rng() % 151936));
  Conversation conv;
  for (int t = 0; t < turns; ++t) {
    std::string user = words(40 + static_cast<int>(rng() % 40));
    messages.push_back({"user", user});
    for (int i = 0; i < 60; ++i) prompt_ids.push_back(static_cast<int32_t>(rng() % 151936));
    std::string request = R"({"model":"qwen3-0.6b","messages":[)";
    std::string rendered;
    for (size_t m = 0; m < messages.size(); ++m) {
      request.append(m ? "," : "").append(R"({"role":")").append(messages[m].first);
      request.append(R"(","content":")").append(messages[m].second).append("\"}");
      rendered += "<|im_start|>" + messages[m].first + "\n" + messages[m].second + "<|im_end|>\n";
    }
    request += R"(],"temperature":0.7,"seed":42,"max_tokens":256})";
    rendered += "<|im_start|>assistant\n";
    proto::Event e;
    e.set_wall_time_ns(1'700'000'000'000'000'000 + t * 1'000'000'000ll);
    auto* c = e.mutable_llm_call();
    c->set_endpoint("/v1/chat/completions");
    c->set_request_json(request);
    c->set_rendered_prompt(rendered);
    for (int32_t id : prompt_ids) c->add_prompt_token_ids(id);
    c->mutable_params()->set_temperature(0.7f);
    c->mutable_params()->set_top_p(0.95f);
    c->mutable_params()->set_max_tokens(256);
    c->mutable_params()->set_seed(42);
    c->set_seed_used(42);
    c->set_numerics("canonical-v1");
    c->set_batch_size(1);
    std::normal_distribution<float> logit(18.0f, 3.0f), gap(1.5f, 1.0f);
    for (int i = 0; i < out_tokens; ++i) {
      int32_t id = static_cast<int32_t>(rng() % 151936);
      c->add_token_ids(id);
      c->add_logits_digests(rng());
      float l = logit(rng);
      c->add_logits(l);
      float g = std::abs(gap(rng));
      c->add_logprobs(-std::log1p(std::exp(-g)) - static_cast<float>(rng() % 100) / 400.0f);
      c->add_runner_up_ids(static_cast<int32_t>(rng() % 151936));
      c->add_runner_up_logits(l - g);
      prompt_ids.push_back(id);
    }
    std::string assistant = words(out_tokens * 3 / 4);
    c->set_output_text(assistant);
    c->set_finish_reason("stop");
    c->set_response_json(R"({"id":"chatcmpl-)" + std::to_string(t) +
                         R"(","choices":[{"message":{"role":"assistant","content":")" + assistant +
                         R"("},"finish_reason":"stop"}]})");
    c->mutable_timings()->set_prefill_ms(12.5 + t);
    c->mutable_timings()->set_decode_ms(300.0 + t);
    messages.push_back({"assistant", assistant});
    for (int i = 0; i < 5; ++i) prompt_ids.push_back(static_cast<int32_t>(rng() % 151936));
    conv.calls.push_back(std::move(e));
  }
  return conv;
}

}  // namespace trace::store::testing
