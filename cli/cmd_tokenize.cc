// `trace tokenize --model DIR [--json] [TEXT]`: the token ids a model's tokenizer gives a
// text (standard input when TEXT is absent or "-", bytes exactly as given).
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/json_print.h"
#include "cli/command.h"
#include "engine/model_files.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::cli::cmd_tokenize {
namespace {

struct TokenizeArgs {
  std::string model_dir;
  std::string text;
  bool text_given = false;
  bool json = false;
};

int RunTokenize(const TokenizeArgs& args) {
  auto loaded = engine::LoadModelTokenizer(args.model_dir);
  if (!loaded.ok()) return ReportError(loaded.status().WithContext("tokenize"));
  const engine::Tokenizer& tokenizer = **loaded;

  std::string text;
  if (!args.text_given || args.text == "-") {
    std::cin >> std::noskipws;
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return ReportError(IOError("tokenize: reading standard input failed"));
  } else {
    text = args.text;
  }

  const std::vector<int32_t> ids = tokenizer.Encode(text);
  if (args.json) {
    nlohmann::json out = {{"ids", ids}, {"pieces", nlohmann::json::array()}};
    for (int32_t id : ids) out["pieces"].push_back(tokenizer.TokenText(id));
    PrintJson(std::cout, out, -1);
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << "\n";
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand(
      "tokenize", "Print the token ids of TEXT (or standard input) under a model's tokenizer");
  cmd->add_option("--model", args->model_dir,
                  "Model folder holding tokenizer.json, or a GGUF file (its tokenizer.ggml.*)")
      ->required()
      ->type_name("DIR|GGUF");
  cmd->add_flag("--json", args->json, "Print {\"ids\": [...], \"pieces\": [...]}");
  cmd->add_option("text", args->text, "Text to tokenize; '-' or absent: standard input")
      ->type_name("TEXT");
  cmd->callback([args, cmd, exit_code] {
    args->text_given = cmd->count("text") > 0;
    *exit_code = RunTokenize(*args);
  });
}

TRACE_REGISTER_COMMAND(300, Setup);

}  // namespace
}  // namespace trace::cli::cmd_tokenize
