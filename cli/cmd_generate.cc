// `trace generate`: prompt -> streamed text, with the engine, tokenizer, chat template and
// sampler of a recorded run (so a generation here is what `trace record` would produce).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "engine/engine.h"
#include "engine/model_files.h"
#include "engine/sampler.h"
#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::cli::cmd_generate {
namespace {

struct GenerateArgs {
  EngineFlags engine;  // --model, --numerics, --threads (cli/engine_flags.h)
  std::string prompt;
  bool chat = false;
  std::string system;
  bool seed_given = false;
  uint64_t seed = 0;
  engine::SamplingParams params;
};

int Run(GenerateArgs args) {
  Status valid = engine::ValidateSamplingParams(args.params);
  if (!valid.ok()) return ReportError(valid);
  Result<EngineSetup> setup = ResolveEngineFlags(args.engine, EngineUse::kPrompt);
  if (!setup.ok()) return ReportError(setup.status());
  const std::string& dir = setup->model_dir;
  auto model = engine::Model::Load(dir, /*hash_weights=*/false);
  if (!model.ok()) return ReportError(model.status());
  auto tokenizer = engine::LoadModelTokenizer(dir);
  if (!tokenizer.ok()) return ReportError(tokenizer.status());

  std::string text = args.prompt;
  if (args.chat) {
    auto tmpl = engine::LoadModelChatTemplate(dir, "", /*required=*/true);
    if (!tmpl.ok()) return ReportError(tmpl.status());
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!args.system.empty()) messages.push_back({{"role", "system"}, {"content", args.system}});
    messages.push_back({{"role", "user"}, {"content", args.prompt}});
    auto rendered =
        (*tmpl)->RenderOrdered(messages, nullptr, /*add_generation_prompt=*/true, nullptr);
    if (!rendered.ok()) return ReportError(rendered.status());
    text = *rendered;
  }
  std::vector<int32_t> prompt_ids = (*tokenizer)->Encode(text);
  if (prompt_ids.empty()) return ReportError(InvalidArgument("--prompt: encodes to no tokens"));
  if (!args.seed_given)
    args.seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);

  const engine::ModelConfig& config = (*model)->config();
  std::vector<int32_t> eos = config.eos_token_ids;
  if (auto id = (*tokenizer)->eos_token_id()) eos.push_back(*id);

  engine::EngineOptions options = setup->engine;
  options.max_context =
      std::min<int64_t>(config.max_position_embeddings, static_cast<int64_t>(prompt_ids.size()) +
                                                            std::max(args.params.max_tokens, 1));
  auto engine = engine::Engine::Create(*model, options);
  if (!engine.ok()) return ReportError(engine.status());

  const auto start = std::chrono::steady_clock::now();
  engine::SeqId seq = (*engine)->NewSequence();
  std::vector<int32_t> feed = prompt_ids;
  std::vector<int32_t> generated;
  engine::IncrementalDecoder decoder(**tokenizer, /*skip_special=*/true);
  std::string output;  // decoded text so far
  size_t printed = 0;  // bytes of `output` already written
  size_t hold = 0;     // a stop sequence may still be completing: hold this many bytes
  for (const auto& s : args.params.stop) hold = std::max(hold, s.size() > 0 ? s.size() - 1 : 0);
  std::string finish = "length";
  double prefill_seconds = 0;
  for (int32_t step = 0; step < args.params.max_tokens; ++step) {
    if ((*engine)->Length(seq) + static_cast<int64_t>(feed.size()) > options.max_context) break;
    engine::BatchItem item{seq, feed, {static_cast<int32_t>(feed.size() - 1)}};
    engine::ForwardOutput out;
    Status st = (*engine)->Forward(std::span<const engine::BatchItem>(&item, 1), &out);
    if (!st.ok()) return ReportError(st);
    if (step == 0) {
      prefill_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    engine::SampleResult r = engine::Sample(out.row(0), args.params, args.seed,
                                            static_cast<uint64_t>(step), {}, generated);
    if (std::find(eos.begin(), eos.end(), r.token) != eos.end()) {
      finish = "stop (eos)";
      break;
    }
    generated.push_back(r.token);
    feed.assign(1, r.token);
    output += decoder.Push(r.token);
    size_t stop_at = std::string::npos;
    for (const auto& s : args.params.stop) {
      if (s.empty()) continue;
      size_t at = output.find(s, printed > s.size() ? printed - s.size() : 0);
      if (at != std::string::npos) stop_at = std::min(stop_at, at);
    }
    if (stop_at != std::string::npos) {
      output.resize(stop_at);
      finish = "stop (sequence)";
      break;
    }
    if (output.size() > printed + hold) {
      std::cout << output.substr(printed, output.size() - hold - printed) << std::flush;
      printed = output.size() - hold;
    }
  }
  if (finish != "stop (sequence)") output += decoder.Flush();  // an incomplete tail
  if (output.size() > printed) std::cout << output.substr(printed);
  std::cout << "\n" << std::flush;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!Globals().quiet) {
    const double decode_seconds = seconds - prefill_seconds;
    std::fprintf(
        stderr,
        "[%zu prompt tokens, %zu generated, finish: %s, seed %llu, %s; prefill %.2fs, "
        "decode %.1f tokens/s, %s]\n",
        prompt_ids.size(), generated.size(), finish.c_str(),
        static_cast<unsigned long long>(args.seed), kernels::NumericsName(options.numerics),
        prefill_seconds,
        generated.size() > 1 && decode_seconds > 0 ? (generated.size() - 1) / decode_seconds : 0.0,
        (*engine)->DeviceDescription().c_str());
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt, streamed");
  AddEngineFlags(cmd, EngineUse::kPrompt, &args->engine);
  cmd->add_option("--prompt", args->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", args->chat, "Wrap the prompt as a user message (chat template)");
  cmd->add_option("--system", args->system, "System message (with --chat)");
  auto* seed = cmd->add_option("--seed", args->seed, "Sampling seed (default: random, printed)");
  cmd->add_option("--temperature", args->params.temperature, "0: greedy");
  cmd->add_option("--top-p", args->params.top_p, "Nucleus cut, (0, 1]");
  cmd->add_option("--top-k", args->params.top_k, "Top-k cut, 0: none");
  cmd->add_option("--max-tokens", args->params.max_tokens, "Most tokens to generate")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--stop", args->params.stop, "Stop sequence (repeatable)");
  cmd->add_option("--frequency-penalty", args->params.frequency_penalty,
                  "Subtracted per earlier occurrence of a token, [-2, 2]")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--presence-penalty", args->params.presence_penalty,
                  "Subtracted once from a token already generated, [-2, 2]")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->callback([args, exit_code, seed] {
    GenerateArgs a = *args;
    a.seed_given = seed->count() > 0;
    *exit_code = Run(std::move(a));
  });
}

TRACE_REGISTER_COMMAND(510, Setup);

}  // namespace
}  // namespace trace::cli::cmd_generate
