// `trace template --model DIR MESSAGES.json [--tools TOOLS.json] [--json]
// [--no-generation-prompt] [--kwargs JSON]`: the exact prompt a model's chat template
// makes of a conversation, and how many tokens it is.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_print.h"
#include "cli/command.h"
#include "engine/model_files.h"
#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::cli::cmd_template {
namespace {

struct TemplateArgs {
  std::string model_dir;
  std::string messages_path;
  std::string tools_path;
  std::string kwargs_json;
  bool json = false;
  bool no_generation_prompt = false;
};

// Reads a JSON file ("-": standard input), keeping object key order as Python would.
Result<nlohmann::ordered_json> ReadJson(const std::string& path, const char* what) {
  std::string text;
  if (path == "-") {
    std::cin >> std::noskipws;
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFound(std::string(what) + " " + path + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return InvalidArgument(std::string(what) + " " + path + ": invalid JSON at byte " +
                           std::to_string(e.byte));
  }
}

int RunTemplate(const TemplateArgs& args) {
  auto tmpl = engine::LoadModelChatTemplate(args.model_dir, "", /*required=*/true);
  if (!tmpl.ok()) return ReportError(tmpl.status().WithContext("template"));

  auto doc = ReadJson(args.messages_path, "messages");
  if (!doc.ok()) return ReportError(doc.status().WithContext("template"));
  // Either a list of messages, or a chat-completions request body {"messages", "tools"}.
  nlohmann::ordered_json messages, tools = nullptr;
  if (doc->is_array()) {
    messages = *doc;
  } else if (doc->is_object() && doc->contains("messages")) {
    messages = (*doc)["messages"];
    if (doc->contains("tools")) tools = (*doc)["tools"];
  } else {
    return ReportError(InvalidArgument("template: messages " + args.messages_path +
                                       ": expected a list of messages or an object with "
                                       "'messages'"));
  }
  if (!args.tools_path.empty()) {
    auto t = ReadJson(args.tools_path, "tools");
    if (!t.ok()) return ReportError(t.status().WithContext("template"));
    tools = *t;
  }
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (!args.kwargs_json.empty()) {
    kwargs = nlohmann::ordered_json::parse(args.kwargs_json, nullptr, false);
    if (kwargs.is_discarded() || !kwargs.is_object()) {
      return ReportError(InvalidArgument("template: --kwargs: not a JSON object"));
    }
  }

  auto prompt = (*tmpl)->RenderOrdered(messages, tools, !args.no_generation_prompt, kwargs);
  if (!prompt.ok()) return ReportError(prompt.status());

  // The token count needs the model's tokenizer.json; without one, print the prompt alone.
  std::optional<std::vector<int32_t>> ids;
  Result<bool> has_tokenizer = engine::HasModelTokenizer(args.model_dir);
  // An unreadable tokenizer fails in LoadModelTokenizer with its reason.
  if (!has_tokenizer.ok() || *has_tokenizer) {
    auto tokenizer = engine::LoadModelTokenizer(args.model_dir);
    if (!tokenizer.ok()) return ReportError(tokenizer.status().WithContext("template"));
    ids = (*tokenizer)->Encode(*prompt);
  }

  if (args.json) {
    nlohmann::ordered_json out = {{"prompt", *prompt}};
    out["tokens"] = ids ? nlohmann::ordered_json(ids->size()) : nlohmann::ordered_json(nullptr);
    out["ids"] = ids ? nlohmann::ordered_json(*ids) : nlohmann::ordered_json(nullptr);
    PrintJson(std::cout, out, -1);
  } else {
    // The prompt goes to stdout byte for byte; the count to stderr, so stdout stays exact.
    std::cout << *prompt << std::flush;
    if (ids) std::cerr << "trace: " << ids->size() << " tokens\n";
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TemplateArgs>();
  auto* cmd = app.add_subcommand(
      "template", "Render a conversation with a model's chat template; print the prompt");
  cmd->add_option("--model", args->model_dir,
                  "Model folder holding tokenizer_config.json, or a GGUF file (its\n"
                  "tokenizer.chat_template)")
      ->required()
      ->type_name("DIR|GGUF");
  cmd->add_option("messages", args->messages_path,
                  "JSON list of messages, or a chat request body with 'messages' ('-': stdin)")
      ->required()
      ->type_name("MESSAGES.json");
  cmd->add_option("--tools", args->tools_path, "JSON list of tool schemas")
      ->type_name("TOOLS.json");
  cmd->add_option("--kwargs", args->kwargs_json,
                  "Extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}'")
      ->type_name("JSON");
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt,
                "Do not append the assistant generation prompt");
  cmd->add_flag("--json", args->json, "Print {\"prompt\": ..., \"tokens\": N, \"ids\": [...]}");
  cmd->callback([args, exit_code] { *exit_code = RunTemplate(*args); });
}

TRACE_REGISTER_COMMAND(310, Setup);

}  // namespace
}  // namespace trace::cli::cmd_template
