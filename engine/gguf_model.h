// A model from one GGUF file (llama.cpp, Ollama, LM Studio): the architectures trace runs,
// mapped from GGUF's names (general.architecture, `{arch}.*` hyper-parameters, `blk.N.*`
// tensors) onto the same ModelConfig and ModelWeights a Hugging Face folder gives, so every
// backend runs it unchanged; and its tokenizer and chat template from the file's metadata.
//
// Ownership: the returned Model owns the file's mapping and the few copies it makes (q/k rows
// of `llama` files, which llama.cpp's converter permutes, put back in Hugging Face order).
// Thread safety: immutable once loaded. Errors: one line naming the file and the metadata key
// or tensor: an architecture, tensor type or scaling that is not supported, a missing or
// misshaped tensor, a missing hyper-parameter.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/gguf.h"

namespace trace::engine {

// Loads FILE.gguf (Model::Load calls it for a path whose first bytes are "GGUF").
Result<std::shared_ptr<const Model>> LoadGgufModel(const std::string& path, bool hash_weights);

// The file's hyper-parameters as a ModelConfig (validated by the same rules as config.json).
Result<ModelConfig> GgufModelConfig(const GgufFile& file);

// The tokenizer.json and tokenizer_config.json that the file's tokenizer metadata describes
// (tokenizer.ggml.model "gpt2": byte-level BPE with its tokens, merges, token types and
// special ids, and the pre-tokenizer that tokenizer.ggml.pre names; tokenizer.chat_template),
// so the one tokenizer and template implementation reads both formats.
struct GgufTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};
Result<GgufTokenizerFiles> GgufTokenizer(const GgufFile& file);

}  // namespace trace::engine
