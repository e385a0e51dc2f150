// The redactor: replaces secrets in a run's header and events (or in any protobuf
// message) by "[REDACTED:<rule>]" and reports what it changed (docs/export.md,
// "Redaction"). `trace export` applies it by default; `trace push --redact` is meant to
// reuse RedactRun.
//
// What it does to a message: every string and bytes field, recursively (repeated and map
// fields included), is scanned with every rule; all matches are found on the original
// text, overlaps resolved (earliest start, then longest, then rule order) and replaced
// in one pass, so a marker is never matched again. Fields whose name ends in "_json"
// (request_json, response_json, arguments_json, ...) that hold a JSON text are also
// scanned string by string: every key and string value, decoded, which catches a secret
// that is JSON-escaped in the raw text ("sk-\u0061...") or that sits in a key. A string
// that changed is written back escaped, in place: the rest of the text stays byte for byte,
// at any nesting depth, and an object that repeats a key has each of its members scanned.
//
// Token ids: a recorded prompt's token ids spell the prompt, and a sampled token list
// spells the output, so redacting the text alone would leave the secret in the ids. When
// an LlmCall's rendered prompt (or, without one, its request) was redacted its
// prompt_token_ids are removed; when its output text (or, without one, its response) was
// redacted the per-sampled-token arrays (ids, digests, logits, log-probabilities,
// runner-ups, layer digests) are removed. The report lists those calls by seq. Such a call
// cannot be replayed from the redacted copy.
//
// Ownership: a Redactor owns its compiled patterns and literal values. Thread safety: all
// methods are const and reentrant; one Redactor may serve many threads. Errors: Create
// fails (InvalidArgument naming the rule) only on a pattern that does not compile. A
// pattern that hits PCRE2's match limit on some text makes that whole field count as
// secret (replaced by "[REDACTED:<rule>]"), never skipped.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "redact/pattern.h"
#include "redact/rules.h"

namespace trace::redact {

// One field that had secrets: where ("header", "seq 12"), which field ("llm_call.
// request_json", "argv[2]", "env[DB_URL]") and how many replacements per rule.
struct FieldRedaction {
  std::string where;
  std::string field;
  std::map<std::string, int> rules;
};

struct RedactionReport {
  std::vector<FieldRedaction> fields;
  std::vector<uint64_t> prompt_tokens_removed;   // seqs of LlmCalls that lost prompt ids
  std::vector<uint64_t> sampled_tokens_removed;  // seqs of LlmCalls that lost sampled ids
  int64_t replacements() const;
  // Replacements per rule over the whole report.
  std::map<std::string, int> RuleTotals() const;
  bool empty() const { return fields.empty(); }
};

// The sentence every redacted export carries (docs/export.md): what a run imported from
// it can and cannot be checked for.
extern const char kRedactedImportNote[];

class Redactor {
 public:
  static Result<Redactor> Create(const RuleSet& rules);
  Redactor(Redactor&&) noexcept = default;
  Redactor& operator=(Redactor&&) noexcept = default;

  // Redacts `text` in place; adds per-rule replacement counts to *hits (may be null).
  // Returns true when it changed anything.
  bool RedactText(std::string* text, std::map<std::string, int>* hits) const;
  // RedactText, then (when `text` parses as JSON) every decoded key and string value.
  bool RedactJsonText(std::string* text, std::map<std::string, int>* hits) const;

  // Every string/bytes field of `message`, recursively. Each changed field is added to
  // `report` under `where`, named by its path from `message` (prefixed by `prefix`).
  // Returns the paths that changed.
  std::vector<std::string> RedactMessage(google::protobuf::Message* message,
                                         const std::string& where, const std::string& prefix,
                                         RedactionReport* report) const;

  // The header: every string field, and `env` values whose names look secret replaced as a
  // whole ("[REDACTED:env-name]").
  void RedactHeader(proto::RunHeader* header, RedactionReport* report) const;
  // One event, with the token-id rule above for LlmCalls.
  void RedactEvent(proto::Event* event, RedactionReport* report) const;

  // Names of the rules in force, patterns then literals.
  std::vector<std::string> RuleNames() const;

 private:
  // One pass of RedactText; with `json_layout` (a valid JSON text's layout, see
  // redactor.cc) a match replaces only the string content it covers, so the document stays
  // valid JSON. A pass whose output would pass `max_size` bytes replaces the whole text by
  // one marker instead (see GrowthLimit).
  bool Redact(std::string* text, std::map<std::string, int>* hits,
              const std::vector<uint8_t>* json_layout, size_t max_size) const;
  // One pass of RedactJsonText (which repeats it until nothing changes).
  bool RedactJsonOnce(std::string* text, std::map<std::string, int>* hits, size_t max_size) const;
  // The most a redaction of a `size`-byte text may write: every byte replaced by the
  // longest marker, which one pass of any rule set can reach and legitimate rules never
  // pass. Rules whose matches straddle the markers of the pass before grow a text again at
  // every pass (geometrically); such a text is replaced whole by one marker.
  size_t GrowthLimit(size_t size) const;

  struct Pattern {
    std::string name;
    CompiledPattern compiled;
  };
  Redactor() = default;
  std::vector<Pattern> patterns_;
  std::vector<LiteralRule> literals_;
  size_t longest_marker_ = 0;  // bytes, as written in text or inside a JSON string
  // Every marker this redactor writes, as text and as JSON string content: a match inside
  // one of them is not redacted again (Redact).
  std::vector<std::string> markers_;
};

// Redacts a whole run in place: header and every event (for `trace push --redact` and the
// exporters). Events keep their seq and kind.
void RedactRun(const Redactor& redactor, proto::RunHeader* header,
               std::vector<proto::Event>* events, RedactionReport* report);

}  // namespace trace::redact
