// Constrained decoding: token masks that force the output into a fixed grammar — a valid
// Qwen tool call to one of the offered tools (tool_choice required or named), or one of
// the strings of a vLLM-style guided_choice list.
//
// The grammar is a set of alternatives, each a sequence of segments: literal text or a
// choice among strings (token tries over the candidates' tokenizations), a JSON string
// (printable ASCII, bounded length, closed by '"'), or a JSON integer (bounded digits).
// The masks depend only on the grammar, the tokenizer and the tokens sampled so far, so a
// replay that rebuilds the constraint from the recorded spec goes through the same masks.
//
// Ownership: a TokenClasses table is built once per tokenizer and shared (const); a
// Constraint borrows it and the tokenizer, which must outlive it. Thread safety:
// TokenClasses is immutable; a Constraint is used by one thread at a time.
// Errors: Create returns InvalidArgument naming the spec field that cannot be compiled.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::recorder {

// Per-token byte classes used by the value segments, computed once per vocabulary.
class TokenClasses {
 public:
  explicit TokenClasses(const engine::Tokenizer& tokenizer);
  int32_t vocab_size() const { return static_cast<int32_t>(flags_.size()); }
  // Printable ASCII other than '"' and '\\', non-empty.
  bool IsStringContent(int32_t id) const { return flags_[id] & kStringContent; }
  // String content (possibly empty) followed by one closing '"'.
  bool IsStringClose(int32_t id) const { return flags_[id] & kStringClose; }
  bool IsDigits(int32_t id) const { return flags_[id] & kDigits; }
  bool StartsWithZero(int32_t id) const { return flags_[id] & kLeadingZero; }
  int32_t ByteLength(int32_t id) const { return lengths_[id]; }

 private:
  enum : uint8_t { kStringContent = 1, kStringClose = 2, kDigits = 4, kLeadingZero = 8 };
  std::vector<uint8_t> flags_;
  std::vector<int32_t> lengths_;
};

class Constraint {
 public:
  virtual ~Constraint() = default;

  // Compiles a constraint spec (the JSON recorded with the call):
  //   {"kind": "tool_call", "tools": [{"name": .., "parameters": {..}}, ..]}
  //   {"kind": "guided_choice", "choices": ["..", ..]}
  // `end_token` is appended as the final forced token (the chat end-of-turn token).
  static Result<std::unique_ptr<Constraint>> Create(const nlohmann::json& spec,
                                                    const engine::Tokenizer& tokenizer,
                                                    const TokenClasses& classes, int32_t end_token);

  // Sets mask[id] = 1 for every token allowed next, 0 otherwise (resized to the vocab).
  virtual void AllowedMask(std::vector<uint8_t>* mask) const = 0;
  // Consumes a sampled token; an error if it was not allowed (a bug in the caller).
  virtual Status Advance(int32_t token) = 0;
  // True once the grammar, end token included, has been fully produced.
  virtual bool Done() const = 0;
};

// The spec for a request's tools (all of them for "required", the named one for a named
// tool_choice) in the form Create takes.
nlohmann::json ToolCallConstraintSpec(const nlohmann::json& tools_for_template,
                                      const std::string& only_name);
nlohmann::json GuidedChoiceSpec(const std::vector<std::string>& choices);

}  // namespace trace::recorder
