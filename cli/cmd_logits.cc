// `trace logits`: the logits at the last position of a prompt — the top candidates with
// their margins, or every logit written so that it reads back to the same float.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "base/escape.h"
#include "base/hash.h"
#include "base/json_print.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "engine/engine.h"
#include "engine/model_files.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::cli::cmd_logits {
namespace {

struct LogitsArgs {
  EngineFlags engine;  // --model, --numerics, --threads (cli/engine_flags.h)
  std::string prompt;
  std::string tokens;
  int top = 10;
  bool all = false;
  bool json = false;
};

Result<std::vector<int32_t>> ParseTokenList(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string part;
  size_t index = 0;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0 || v > INT32_MAX) {
      return InvalidArgument("--tokens: item " + std::to_string(index) + " '" + part +
                             "' is not a token id");
    }
    ids.push_back(static_cast<int32_t>(v));
    ++index;
  }
  if (ids.empty()) return InvalidArgument("--tokens: no token ids");
  return ids;
}

int Run(const LogitsArgs& args) {
  Result<EngineSetup> setup = ResolveEngineFlags(args.engine, EngineUse::kPrompt);
  if (!setup.ok()) return ReportError(setup.status());
  const std::string& dir = setup->model_dir;
  auto model = engine::Model::Load(dir, /*hash_weights=*/false);
  if (!model.ok()) return ReportError(model.status());
  std::unique_ptr<engine::Tokenizer> tokenizer;
  Result<bool> has_tokenizer = engine::HasModelTokenizer(dir);
  // An unreadable tokenizer fails in LoadModelTokenizer with its reason.
  if (!args.prompt.empty() || !has_tokenizer.ok() || *has_tokenizer) {
    auto loaded = engine::LoadModelTokenizer(dir);
    if (!loaded.ok()) return ReportError(loaded.status());
    tokenizer = std::move(loaded).value();
  }
  std::vector<int32_t> ids;
  if (!args.tokens.empty()) {
    auto parsed = ParseTokenList(args.tokens);
    if (!parsed.ok()) return ReportError(parsed.status());
    ids = std::move(parsed).value();
  } else {
    ids = tokenizer->Encode(args.prompt);
    if (ids.empty()) return ReportError(InvalidArgument("--prompt: encodes to no tokens"));
  }

  engine::EngineOptions options = setup->engine;
  options.max_context = static_cast<int64_t>(ids.size());
  auto engine = engine::Engine::Create(*model, options);
  if (!engine.ok()) return ReportError(engine.status());
  engine::SeqId seq = (*engine)->NewSequence();
  engine::BatchItem item{seq, ids, {static_cast<int32_t>(ids.size() - 1)}};
  engine::ForwardOutput out;
  Status st = (*engine)->Forward(std::span<const engine::BatchItem>(&item, 1), &out);
  if (!st.ok()) return ReportError(st);
  std::span<const float> logits = out.row(0);
  const std::string digest = DigestHex(LogitsDigest(logits));

  // Candidates by (logit desc, id asc), as the sampler orders them.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t top = std::min<size_t>(static_cast<size_t>(std::max(args.top, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  auto piece = [&](int32_t id) {
    return tokenizer ? tokenizer->Decode(std::span<const int32_t>(&id, 1)) : std::string();
  };

  if (args.json) {
    nlohmann::ordered_json j;
    j["tokens"] = ids;
    j["digest"] = digest;
    j["numerics"] = kernels::NumericsName(options.numerics);
    j["numerics_version"] = kernels::kNumericsVersion;
    nlohmann::ordered_json top_list = nlohmann::ordered_json::array();
    for (size_t r = 0; r < top; ++r) {
      int32_t id = order[r];
      nlohmann::ordered_json e;
      e["id"] = id;
      e["piece"] = engine::SanitizeUtf8(piece(id));
      e["logit"] = static_cast<double>(logits[id]);  // exact: reads back to the same float
      if (r + 1 < top) e["margin"] = static_cast<double>(logits[id]) - logits[order[r + 1]];
      top_list.push_back(e);
    }
    j["top"] = top_list;
    if (args.all) {
      std::vector<double> all(logits.begin(), logits.end());
      j["logits"] = all;
    }
    PrintJson(std::cout, j, -1);
    return kExitOk;
  }
  if (args.all) {
    std::printf("# tokens %zu digest %s (%s)\n", ids.size(), digest.c_str(),
                kernels::NumericsName(options.numerics));
    for (size_t id = 0; id < logits.size(); ++id) {
      std::printf("%zu %.9g\n", id, static_cast<double>(logits[id]));
    }
    return kExitOk;
  }
  std::printf("tokens  %zu (last: %d)\ndigest  %s (%s, %s)\n", ids.size(), ids.back(),
              digest.c_str(), kernels::NumericsName(options.numerics), kernels::kNumericsVersion);
  std::printf("%4s %8s %16s %16s  %s\n", "rank", "id", "logit", "margin", "piece");
  for (size_t r = 0; r < top; ++r) {
    int32_t id = order[r];
    char margin[32] = "";
    if (r + 1 < top) {
      std::snprintf(margin, sizeof(margin), "%.9g",
                    static_cast<double>(logits[id]) - logits[order[r + 1]]);
    }
    std::printf("%4zu %8d %16.9g %16s  %s\n", r + 1, id, static_cast<double>(logits[id]), margin,
                QuoteForDisplay(piece(id)).c_str());
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<LogitsArgs>();
  auto* cmd = app.add_subcommand("logits", "Show the logits at the last position of a prompt");
  AddEngineFlags(cmd, EngineUse::kPrompt, &args->engine);
  auto* prompt = cmd->add_option("--prompt", args->prompt, "Prompt text (tokenized)");
  auto* tokens = cmd->add_option("--tokens", args->tokens, "Token ids, e.g. 1,2,3");
  prompt->excludes(tokens);
  cmd->add_option("--top", args->top, "How many top candidates to show")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--all", args->all, "Every logit (with --json: a \"logits\" array)");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args, exit_code, prompt, tokens] {
    if (prompt->count() == 0 && tokens->count() == 0) {
      *exit_code = ReportError(InvalidArgument("logits: give --prompt TEXT or --tokens IDS"));
      return;
    }
    *exit_code = Run(*args);
  });
}

TRACE_REGISTER_COMMAND(520, Setup);

}  // namespace
}  // namespace trace::cli::cmd_logits
