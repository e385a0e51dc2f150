#include "engine/model_files.h"

#include "base/escape.h"
#include "base/files.h"
#include "base/hash.h"
#include "engine/gguf.h"
#include "engine/gguf_model.h"

namespace trace::engine {
namespace {

Result<GgufTokenizerFiles> GgufFilesOf(const std::string& path) {
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  return GgufTokenizer(*file);
}

}  // namespace

Result<bool> IsModelPath(const std::string& model_path) {
  if (IsGgufFile(model_path)) return true;
  return PathExists(model_path + "/config.json");
}

Result<bool> HasModelTokenizer(const std::string& model_path) {
  if (IsGgufFile(model_path)) {
    TRACE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(model_path));
    return file->Find("tokenizer.ggml.model") != nullptr;
  }
  return PathExists(model_path + "/tokenizer.json");
}

Result<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path) {
  if (!IsGgufFile(model_path)) return Tokenizer::Load(model_path + "/tokenizer.json");
  TRACE_ASSIGN_OR_RETURN(GgufTokenizerFiles files, GgufFilesOf(model_path));
  return Tokenizer::LoadFromString(files.tokenizer_json, model_path + " (GGUF tokenizer)",
                                   files.tokenizer_config_json);
}

Result<std::string> ModelTokenizerSha256(const std::string& model_path) {
  if (!IsGgufFile(model_path)) return Sha256File(model_path + "/tokenizer.json");
  TRACE_ASSIGN_OR_RETURN(GgufTokenizerFiles files, GgufFilesOf(model_path));
  return Sha256Hex(files.tokenizer_json);
}

Result<std::unique_ptr<ChatTemplate>> LoadModelChatTemplate(const std::string& model_path,
                                                            const std::string& shown_dir,
                                                            bool required) {
  if (!IsGgufFile(model_path)) {
    const std::string config = model_path + "/tokenizer_config.json";
    return required ? ChatTemplate::FromTokenizerConfig(config, shown_dir)
                    : ChatTemplate::FromTokenizerConfigIfAny(config, shown_dir);
  }
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(model_path));
  const nlohmann::json* source = file->Find("tokenizer.chat_template");
  if (source == nullptr) {
    if (!required) return std::unique_ptr<ChatTemplate>();
    return NotFound(EscapePathForDisplay(model_path) +
                    ": no metadata 'tokenizer.chat_template' (the file has no chat template)");
  }
  const std::string shown = EscapePathForDisplay(shown_dir.empty() ? model_path : shown_dir);
  if (!source->is_string()) {
    return InvalidArgument(shown + ": metadata 'tokenizer.chat_template' is not a string");
  }
  TRACE_ASSIGN_OR_RETURN(
      std::unique_ptr<ChatTemplate> t,
      ChatTemplate::Parse(source->get<std::string>(), shown + ":tokenizer.chat_template"));
  // bos_token / eos_token, as tokenizer_config.json gives them to the template.
  auto token = [&](const char* key) {
    const nlohmann::json* id = file->Find(key);
    const nlohmann::json* tokens = file->Find("tokenizer.ggml.tokens");
    if (id == nullptr || !id->is_number_unsigned() || tokens == nullptr ||
        id->get<uint64_t>() >= tokens->size() || !(*tokens)[id->get<size_t>()].is_string()) {
      return std::string();
    }
    return (*tokens)[id->get<size_t>()].get<std::string>();
  };
  t->SetSpecialTokens(token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id"));
  return t;
}

}  // namespace trace::engine
