// ChatTemplate: renders a Hugging Face chat template (the Jinja2 subset that
// tokenizer_config.json `chat_template` uses) byte-identically to Python's jinja2 as
// transformers' apply_chat_template configures it (sandboxed, trim_blocks, lstrip_blocks,
// loop controls, its tojson, raise_exception, strftime_now).
//
// Ownership: a ChatTemplate owns its source text and parsed program; callers own the
// unique_ptr. Thread safety: immutable after construction; Render is const and may be
// called from several threads at once. Errors: parse and render failures are returned
// as a Status whose one-line message names the origin (file), the template line and the
// construct or value concerned; nothing throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace trace::engine {

// Bounds on the work and memory of one render, so that a template from an untrusted model
// folder fails with a one-line error instead of running for hours or building gigabytes
// (jinja2 would try). The defaults are far above what real chat templates need
// (docs/chat-templates.md: Limits); smaller bounds let a test or a fuzzer reach them in
// milliseconds, where the defaults take seconds (minutes under a sanitizer at -O0).
struct RenderLimits {
  // Loop iterations (a for-loop's `if` filter included) and macro calls: what bounds nested
  // loops and a macro calling itself more than once, where each step is cheap but their
  // number multiplies. Qwen3's template takes about 2 a message plus 1 a tool call, so even
  // a 1M-token context (about 450,000 steps) stays below the default.
  int64_t max_steps = 1'000'000;
  // Bytes of the rendered output, and of any string or list built on the way (a list counts
  // its values' sizes): what bounds `s + s` in a loop, a join, str(), tojson, repetition.
  size_t max_size = size_t{256} << 20;
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;

  // Reads `chat_template` (a string, or the list form [{"name": ..., "template": ...}],
  // of which "default" is used), `bos_token` and `eos_token` (strings or AddedToken
  // objects with "content") from a tokenizer_config.json file.
  // Errors while reading name the file by its path; the template's own parse and render
  // errors name it as `shown_dir`/tokenizer_config.json (or chat_template.jinja) when
  // `shown_dir` is given, so that a server can return them to a client without telling it
  // where the model lives on the server's disk.
  static Result<std::unique_ptr<ChatTemplate>> FromTokenizerConfig(
      const std::string& tokenizer_config_json_path, const std::string& shown_dir = "");
  // The same, with nullptr (not an error) when the model has no chat template at all: no
  // `chat_template` field and no chat_template.jinja (a base model served for completions).
  static Result<std::unique_ptr<ChatTemplate>> FromTokenizerConfigIfAny(
      const std::string& tokenizer_config_json_path, const std::string& shown_dir = "");

  // Parses template text. `origin` names it in error messages (e.g. a file path).
  // bos_token / eos_token are empty strings unless set with SetSpecialTokens.
  static Result<std::unique_ptr<ChatTemplate>> Parse(std::string_view source, std::string origin);

  // Renders with the variables transformers passes: messages, tools (none when null, as
  // transformers passes tools=None), documents (none), add_generation_prompt, bos_token and
  // eos_token (when set), and every member of `extra_kwargs` (an object or null; e.g.
  // {"enable_thinking": false}). nlohmann::json sorts object keys, which changes what
  // `tojson` prints; use RenderOrdered to keep the order the caller received.
  Result<std::string> Render(const nlohmann::json& messages, const nlohmann::json& tools,
                             bool add_generation_prompt, const nlohmann::json& extra_kwargs) const;

  // As Render, keeping object keys in their original order (as Python's dicts do).
  virtual Result<std::string> RenderOrdered(const nlohmann::ordered_json& messages,
                                            const nlohmann::ordered_json& tools,
                                            bool add_generation_prompt,
                                            const nlohmann::ordered_json& extra_kwargs) const = 0;

  // The template text exactly as read; hashed into the model fingerprint.
  virtual const std::string& source() const = 0;

  // The special tokens passed to the template as bos_token / eos_token; an empty string
  // means the variable is not passed at all (undefined in the template).
  virtual const std::string& bos_token() const = 0;
  virtual const std::string& eos_token() const = 0;
  virtual void SetSpecialTokens(std::string bos_token, std::string eos_token) = 0;

  // The bounds every later render is held to (RenderLimits{} unless set). Like
  // SetSpecialTokens, a setting made before rendering, not while another thread renders.
  virtual const RenderLimits& limits() const = 0;
  virtual void SetLimits(const RenderLimits& limits) = 0;
};

}  // namespace trace::engine
