// A model path's tokenizer and chat template, whatever the format: a Hugging Face folder's
// tokenizer.json and tokenizer_config.json (or chat_template.jinja), or what a GGUF file's
// metadata says (tokenizer.ggml.*, tokenizer.chat_template; engine/gguf_model.h). Every command
// that takes --model reads them through here, so a .gguf works wherever a folder does.
//
// Ownership: the caller owns what is returned. Thread safety: reentrant. Errors: one line
// naming the file (a broken tokenizer.json, a GGUF tokenizer that is not supported).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::engine {

// Whether `model_path` is a model: a folder with config.json, or a GGUF file.
Result<bool> IsModelPath(const std::string& model_path);

// Whether the model has a tokenizer at all (`trace logits --tokens` needs none).
Result<bool> HasModelTokenizer(const std::string& model_path);

// The model's tokenizer.
Result<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path);

// What the fingerprint records as the tokenizer's sha256 (of tokenizer.json, or of the
// tokenizer.json a GGUF file's metadata makes), to check that a tokenizer is the recorded one.
Result<std::string> ModelTokenizerSha256(const std::string& model_path);

// The chat template, or nullptr when the model has none (a base model); with `required`, a
// model without one is a NotFound error naming where it was looked for. `shown_dir` as in
// ChatTemplate::FromTokenizerConfig: how template errors name the model's files.
Result<std::unique_ptr<ChatTemplate>> LoadModelChatTemplate(const std::string& model_path,
                                                            const std::string& shown_dir = "",
                                                            bool required = false);

}  // namespace trace::engine
