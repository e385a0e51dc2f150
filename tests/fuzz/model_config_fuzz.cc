// Fuzz target: config.json and generation_config.json parsing (engine/model_config.h).
// Promises: no crash; an error is one line naming the file; an accepted config is usable
// (positive sizes, heads that divide, an even head_dim, finite positive rope_theta and
// rms_norm_eps as floats, sizes small enough that the engine's products cannot overflow)
// and survives ModelConfigToJson -> ParseModelConfig unchanged.
#include <cmath>
#include <string>
#include <vector>

#include "engine/model_config.h"
#include "engine/model_init.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using trace::engine::ModelConfig;
using trace::fuzz::Fail;

bool Same(const ModelConfig& a, const ModelConfig& b) {
  return a.architecture == b.architecture && a.vocab_size == b.vocab_size &&
         a.hidden_size == b.hidden_size && a.intermediate_size == b.intermediate_size &&
         a.num_layers == b.num_layers && a.num_heads == b.num_heads &&
         a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim &&
         a.max_position_embeddings == b.max_position_embeddings && a.rope_theta == b.rope_theta &&
         a.rms_norm_eps == b.rms_norm_eps && a.tie_word_embeddings == b.tie_word_embeddings &&
         a.attention_bias == b.attention_bias && a.qk_norm == b.qk_norm && a.dtype == b.dtype &&
         a.eos_token_ids == b.eos_token_ids && a.hidden_activation == b.hidden_activation &&
         a.attention_scale_dim == b.attention_scale_dim && a.sliding_window == b.sliding_window &&
         a.sliding_layers == b.sliding_layers && a.rope_local_theta == b.rope_local_theta &&
         a.norm_unit_offset == b.norm_unit_offset && a.sandwich_norms == b.sandwich_norms &&
         a.embedding_scale == b.embedding_scale && a.final_logit_softcap == b.final_logit_softcap &&
         a.rope_scaling.type == b.rope_scaling.type &&
         a.rope_scaling.factor == b.rope_scaling.factor;
}

void CheckUsable(const ModelConfig& c) {
  for (int64_t v : {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads,
                    c.num_kv_heads, c.head_dim, c.max_position_embeddings}) {
    if (v <= 0) Fail("accepted a non-positive size");
  }
  if (c.num_heads % c.num_kv_heads != 0) Fail("accepted heads that do not divide");
  if (c.head_dim % 2 != 0) Fail("accepted an odd head_dim");
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps)) Fail("accepted rms_norm_eps");
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) Fail("accepted rope_theta");
  if (c.attention_scale_dim <= 0) Fail("accepted a non-positive attention scale");
  if (c.sliding_window < 0 || c.sliding_window >= c.max_position_embeddings) {
    Fail("kept a sliding window that is negative or no shorter than the context");
  }
  if (!c.sliding_layers.empty() && static_cast<int64_t>(c.sliding_layers.size()) != c.num_layers) {
    Fail("accepted layer types that are not one per layer");
  }
  if (!(c.final_logit_softcap >= 0) || !std::isfinite(c.final_logit_softcap)) {
    Fail("accepted a soft-cap that is negative or not finite");
  }
  if (!(c.embedding_scale > 0) || !std::isfinite(c.embedding_scale))
    Fail("accepted an embedding scale");
  // The largest products the engine forms (weights, KV cache, RoPE tables) fit in int64.
  const __int128 weights = static_cast<__int128>(c.vocab_size) * c.hidden_size +
                           static_cast<__int128>(c.num_layers) * c.hidden_size *
                               (c.intermediate_size + c.num_heads * c.head_dim);
  const __int128 cache =
      static_cast<__int128>(c.max_position_embeddings) * c.num_layers * c.num_kv_heads * c.head_dim;
  if (weights > (static_cast<__int128>(1) << 62) || cache > (static_cast<__int128>(1) << 62)) {
    Fail("accepted sizes whose products overflow");
  }
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  std::vector<std::string> seeds;
  for (const std::string& preset : trace::engine::ModelPresetNames()) {
    auto c = trace::engine::PresetConfig(preset);
    if (c.ok()) seeds.push_back(trace::engine::ModelConfigToJson(*c));
  }
  seeds.push_back(R"({"eos_token_id": [151645, 151643], "temperature": 0.6})");
  return seeds;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = trace::engine::ParseModelConfig(text, "fuzz/config.json");
  if (!parsed.ok()) {
    trace::fuzz::RequireOneLine(parsed.status(), "ParseModelConfig", "fuzz/config.json");
  } else {
    CheckUsable(*parsed);
    const std::string again = trace::engine::ModelConfigToJson(*parsed);
    auto back = trace::engine::ParseModelConfig(again, "again");
    if (!back.ok()) Fail("ModelConfigToJson output does not parse: " + back.status().message());
    if (!Same(*parsed, *back)) Fail("config changed through ModelConfigToJson: " + again);
  }
  ModelConfig merged;
  trace::Status st =
      trace::engine::MergeGenerationConfig(text, "fuzz/generation_config.json", &merged);
  if (!st.ok()) {
    trace::fuzz::RequireOneLine(st, "MergeGenerationConfig", "fuzz/generation_config.json");
  }
  return 0;
}
