// The replayer's constraint factory made of the recorder's grammar code: a replay of a
// constrained call (structured output, tool calls) rebuilds its token masks with the same
// code that recorded it. The replayer knows no recorder (docs/architecture.md), so the
// commands that replay (replay, verify, worker) wire them together here.
//
// Ownership: the factory owns its state (one recorder factory per tokenizer). Thread
// safety: one replay at a time per factory. Errors: a spec the grammar code refuses, or a
// model folder without a tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "recorder/constrained.h"
#include "replayer/replayer.h"

namespace trace::cli {

// Rebuilds a constrained call's masks with the recorder's grammar code.
class RecorderConstraint : public replayer::ConstraintMasks {
 public:
  explicit RecorderConstraint(std::unique_ptr<recorder::Constraint> c) : c_(std::move(c)) {}
  void AllowedMask(std::vector<uint8_t>* mask) const override { c_->AllowedMask(mask); }
  Status Advance(int32_t token) override { return c_->Advance(token); }

 private:
  std::unique_ptr<recorder::Constraint> c_;
};

inline replayer::ConstraintFactory MakeConstraintFactory() {
  // One recorder factory per tokenizer: grammars compiled once per distinct spec.
  struct State {
    const engine::Tokenizer* tokenizer = nullptr;
    std::unique_ptr<recorder::ConstraintFactory> factory;
  };
  auto state = std::make_shared<State>();
  return [state](const std::string& spec_json, const engine::Tokenizer* tokenizer)
             -> Result<std::unique_ptr<replayer::ConstraintMasks>> {
    if (tokenizer == nullptr) {
      return FailedPrecondition("the model folder has no tokenizer.json to rebuild it from");
    }
    if (state->tokenizer != tokenizer) {
      // The end-of-turn token the grammar ends with (a spec may name its own).
      int32_t end_token = -1;
      if (auto id = tokenizer->TokenId("<|im_end|>")) {
        end_token = *id;
      } else if (auto eos = tokenizer->eos_token_id()) {
        end_token = *eos;
      }
      state->factory = std::make_unique<recorder::ConstraintFactory>(*tokenizer, end_token);
      state->tokenizer = tokenizer;
    }
    TRACE_ASSIGN_OR_RETURN(auto c, state->factory->Create(spec_json));
    return std::unique_ptr<replayer::ConstraintMasks>(
        std::make_unique<RecorderConstraint>(std::move(c)));
  };
}

}  // namespace trace::cli
