// Constrained decoding: token masks that force a generation into a grammar.
//
// Two generations of constraint spec, both recorded as LlmCall.constraint_json and rebuilt
// from it for replay, so a replay goes through the very masks the recording did:
//  - version 2 (`"version": 2`; recorder/grammar/): a byte-level grammar compiled from JSON
//    Schema, for response_format json_object / json_schema and for tool calls forced by
//    tool_choice (arguments following each tool's parameter schema, properties in schema
//    order), optionally both as alternatives;
//  - version 1 (no "version"; legacy_constraint.cc): the earlier token-trie constraints,
//    kept so that runs recorded with them replay unchanged, and still used for vLLM-style
//    guided_choice.
// The masks depend only on the spec, the tokenizer and the tokens sampled so far.
//
// Ownership: a ConstraintFactory is built once per tokenizer (which must outlive it) and
// shares its compiled grammars and vocabulary tables with the constraints it makes; a
// Constraint is owned by the generation using it. Thread safety: ConstraintFactory::Create
// may be called from several threads; a Constraint is used by one thread at a time.
// Errors: a spec that cannot be compiled is InvalidArgument naming the schema keyword and
// where it is (the server answers it as a 400).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"
#include "recorder/api/model_call.h"
#include "recorder/grammar/grammar.h"
#include "recorder/grammar/token_index.h"

namespace trace::recorder {

// The current spec version written by ConstraintSpecFor.
inline constexpr int kConstraintSpecVersion = 2;

// Per-token byte classes used by the version-1 value segments, computed once per vocabulary.
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

  // Compiles a version-1 spec:
  //   {"kind": "tool_call", "tools": [{"name": .., "parameters": {..}}, ..]}
  //   {"kind": "guided_choice", "choices": ["..", ..]}
  // `end_token` is appended as the final forced token (the chat end-of-turn token).
  static Result<std::unique_ptr<Constraint>> Create(const nlohmann::json& spec,
                                                    const engine::Tokenizer& tokenizer,
                                                    const TokenClasses& classes, int32_t end_token);

  // Sets mask[id] = 1 for every token allowed next, 0 otherwise (resized to the vocab).
  virtual void AllowedMask(std::vector<uint8_t>* mask) = 0;
  // Consumes a sampled token; an error if it was not allowed (a bug in the caller).
  virtual Status Advance(int32_t token) = 0;
  // True once the grammar, end token included, has been fully produced.
  virtual bool Done() const = 0;
};

// The grammar of a version-2 spec (see ConstraintSpecFor for its forms).
Result<std::shared_ptr<const grammar::Grammar>> CompileConstraintGrammar(
    const nlohmann::ordered_json& spec);

// Makes constraints from recorded or fresh specs for one tokenizer: version-2 grammars are
// compiled once per distinct spec (an LRU cache keyed by the spec's hash), the vocabulary
// tables once.
class ConstraintFactory {
 public:
  // `end_token`: the token that ends a constrained output (the chat end-of-turn token).
  ConstraintFactory(const engine::Tokenizer& tokenizer, int32_t end_token,
                    size_t cache_entries = 64);
  Result<std::unique_ptr<Constraint>> Create(const std::string& spec_json);

  struct Stats {
    int64_t compiled = 0;    // grammars compiled
    int64_t cache_hits = 0;  // specs served from the cache
  };
  Stats stats() const;

 private:
  Result<std::shared_ptr<const grammar::Grammar>> Grammar(const std::string& spec_json,
                                                          const nlohmann::ordered_json& spec);
  std::shared_ptr<const grammar::TokenIndex> Index();
  const TokenClasses& Classes();

  const engine::Tokenizer& tokenizer_;
  int32_t end_token_;
  size_t cache_entries_;
  mutable std::mutex mu_;  // guards: index_, classes_, lru_, by_hash_, stats_
  std::shared_ptr<const grammar::TokenIndex> index_;
  std::unique_ptr<TokenClasses> classes_;
  // LRU: most recent first; the map points into the list.
  std::list<std::pair<uint64_t, std::shared_ptr<const grammar::Grammar>>> lru_;
  std::unordered_map<uint64_t, decltype(lru_)::iterator> by_hash_;
  Stats stats_;
};

// The constraint spec for a request (JSON text; empty: unconstrained). `tools_rendered`:
// the chat template was given the tools (tool_choice is not "none"). Version 2 forms:
//   {"kind": "tool_call", "version": 2, "parallel": B, "tools": [{"name", "parameters", "strict"}]}
//     tool_choice required (all tools; several calls when parallel) or named (that one);
//   {"kind": "json", "version": 2, "format": "json_object" | "json_schema", "name", "strict",
//    "schema", ["tools", "parallel"]}
//     response_format; with tool_choice auto and tools, a tool call is the alternative.
// guided_choice gives the version-1 {"kind": "guided_choice", "choices": [...]}.
std::string ConstraintSpecFor(const CompletionRequest& req, bool tools_rendered);

// Version-1 specs (tests of recorded runs, and guided_choice).
nlohmann::json ToolCallConstraintSpec(const nlohmann::json& tools_for_template,
                                      const std::string& only_name);
nlohmann::json GuidedChoiceSpec(const std::vector<std::string>& choices);

}  // namespace trace::recorder
