// perf/model_folder.h: a model folder and its optional tokenizer.
#include "perf/model_folder.h"

#include <filesystem>
#include <system_error>

namespace trace::perf {

Result<LoadedModel> LoadModelFolder(const std::string& dir) {
  LoadedModel l;
  l.dir = dir;
  TRACE_ASSIGN_OR_RETURN(l.model, engine::Model::Load(l.dir, /*hash_weights=*/false));
  const std::string tok = l.dir + "/tokenizer.json";
  std::error_code ec;
  if (std::filesystem::exists(tok, ec)) {
    TRACE_ASSIGN_OR_RETURN(l.tokenizer, engine::Tokenizer::Load(tok));
  }
  return l;
}

}  // namespace trace::perf
