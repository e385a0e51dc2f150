// config.json and generation_config.json of a Hugging Face model folder, parsed into
// ModelConfig (engine/engine.h), and the reverse for `trace model init`.
//
// Ownership: values. Thread safety: reentrant. Errors: a missing or ill-typed field, an
// unknown architecture (model_type) or dtype (torch_dtype) is a one-line Status naming the
// file and the field.
#pragma once

#include <string>

#include "base/status.h"
#include "engine/engine.h"

namespace trace::engine {

// Parses config.json text; `path` names the file in errors.
Result<ModelConfig> ParseModelConfig(const std::string& text, const std::string& path);

// Merges eos_token_id (an int or a list) from generation_config.json text into `config`
// (added after those of config.json, without duplicates).
Status MergeGenerationConfig(const std::string& text, const std::string& path, ModelConfig* config);

// config.json text for `config`, in the Hugging Face layout of its architecture.
std::string ModelConfigToJson(const ModelConfig& config);

// Gemma's embedding scale: sqrt(hidden) as transformers' Gemma3TextScaledWordEmbedding holds
// it, a float32 tensor cast to the weights' dtype.
float GemmaEmbeddingScale(int64_t hidden, kernels::DType dtype);

// "bfloat16" / "float16" / "float32".
const char* TorchDTypeName(kernels::DType dtype);

}  // namespace trace::engine
