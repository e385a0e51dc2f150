// A model folder loaded for an experiment of `trace bench`: the model and, when the folder
// has one, its tokenizer (the throughput sweep draws random tokens without it; the
// determinism experiment needs it to encode its prompt).
//
// Ownership: a LoadedModel owns its tokenizer and shares its model (engines keep it alive).
// Thread safety: loading is independent per call; a LoadedModel is used by one thread.
// Errors: the model's and the tokenizer's load errors, naming the file.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::perf {

struct LoadedModel {
  std::string dir;
  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<engine::Tokenizer> tokenizer;  // null when the folder has none
};

// Loads the model of `dir` (weights not hashed) and its tokenizer.json when there is one.
Result<LoadedModel> LoadModelFolder(const std::string& dir);

}  // namespace trace::perf
