// `trace show RUN`: a readable timeline of one run (or --json for tools).
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/hash.h"
#include "base/json_print.h"
#include "base/wall_clock.h"
#include "store/verify_queue.h"

#include "cli/command.h"
#include "recorder/api/json_body.h"
#include "recorder/api/openai_embeddings.h"
#include "store/export.h"
#include "store/store.h"
#include "ui/run_json.h"

namespace trace::cli::cmd_show {
namespace {

struct Options {
  std::string run;
  bool json = false;
  size_t width = 100;  // excerpt length
};

// One line, printable (base/escape.h), at most `max` bytes with "..." where it was cut
// (keeping the end when `tail`).
std::string Excerpt(std::string_view text, size_t max, bool tail = false) {
  return EscapeForDisplay(text, max, tail ? ClipSide::kKeepTail : ClipSide::kKeepHead);
}

// A value the reader must read exactly (a prompt, an output, a tool's result): between
// quotes, its own quotes and backslashes escaped too (QuoteForDisplay).
std::string Quote(std::string_view text, size_t max, bool tail = false) {
  return QuoteForDisplay(text, max, tail ? ClipSide::kKeepTail : ClipSide::kKeepHead);
}

std::string FormatTime(int64_t ns) {
  return UtcTimeText(ns, /*millis=*/true);
}

std::string HowName(const proto::RunEnd& end) {
  switch (end.how()) {
    case proto::RunEnd::EXITED:
      return "exited " + std::to_string(end.exit_code());
    case proto::RunEnd::SIGNALLED:
      return "killed by signal " + std::to_string(end.signal());
    case proto::RunEnd::RECORDER_KILLED:
      return "stopped by the recorder (signal " + std::to_string(end.signal()) + ")";
    case proto::RunEnd::RECORDER_ERROR:
      return "recorder error";
    default:
      return "ended";
  }
}

// The human-readable lines of one event (first line after the "#seq kind" prefix).
std::vector<std::string> Describe(const proto::Event& e, size_t width) {
  std::vector<std::string> lines;
  char buf[256];
  switch (e.kind_case()) {
    case proto::Event::kLlmCall: {
      const auto& c = e.llm_call();
      const bool embeddings = c.api() == recorder::kApiEmbeddings;
      if (embeddings) {
        // No text in or out: the inputs, and the vectors' count and size.
        std::snprintf(buf, sizeof buf, "%s  %s %s, %" PRId64 " in tok (%s)", c.endpoint().c_str(),
                      c.upstream().empty() ? "answered" : "upstream",
                      c.upstream().empty() ? "from the recording" : c.upstream().c_str(),
                      c.usage().input_tokens(), std::string(recorder::kApiEmbeddings).c_str());
      } else if (!c.upstream().empty()) {
        // Answered by an upstream: its usage, no token ids.
        std::snprintf(
            buf, sizeof buf, "%s  upstream %s, %" PRId64 " in / %" PRId64 " out tok (%s)%s",
            c.endpoint().c_str(), c.upstream().c_str(), c.usage().input_tokens(),
            c.usage().output_tokens(), c.finish_reason().empty() ? "-" : c.finish_reason().c_str(),
            c.stream() ? ", streamed" : "");
      } else {
        std::snprintf(buf, sizeof buf,
                      "%s  prompt %d tok, sampled %d tok (%s), T=%g seed %" PRIu64 ", batch %d, %s",
                      c.endpoint().c_str(), c.prompt_token_ids_size(), c.token_ids_size(),
                      c.finish_reason().empty() ? "-" : c.finish_reason().c_str(),
                      c.params().temperature(), c.seed_used(), c.batch_size(),
                      c.numerics().c_str());
      }
      lines.push_back(buf);
      if (const auto& p = c.params();
          p.frequency_penalty() != 0 || p.presence_penalty() != 0 || p.logit_bias_size() > 0) {
        std::snprintf(buf, sizeof buf, "frequency_penalty %g, presence_penalty %g, logit_bias %d",
                      p.frequency_penalty(), p.presence_penalty(), p.logit_bias_size());
        lines.push_back(buf);
      }
      if (c.cassette_seq() != 0) {
        lines.push_back("answered from the recording (parent's #" +
                        std::to_string(c.cassette_seq()) + "), no model ran");
      }
      if (c.http_status() != 0 && c.http_status() != 200) {
        lines.push_back("error " + std::to_string(c.http_status()) + ": " +
                        Excerpt(c.error(), width));
      }
      if (!c.rendered_prompt().empty()) {
        lines.push_back("prompt: " + Quote(c.rendered_prompt(), width, /*tail=*/true));
      }
      if (embeddings) {
        recorder::EmbeddingsRequest req = recorder::ReadEmbeddingsRequest(c.request_json());
        std::string inputs;
        for (const std::string& text : req.inputs) {
          if (inputs.size() >= width) break;  // the line is cut at `width` anyway
          inputs += (inputs.empty() ? "" : ", ") + Quote(text, width);
        }
        lines.push_back("input: " + Excerpt(inputs, width));
        recorder::EmbeddingsSummary s =
            recorder::ReadEmbeddingsResponse(recorder::ParseJsonOrDiscarded(c.response_json()));
        if (s.vectors > 0) {
          lines.push_back("output: " + std::to_string(s.vectors) + " vector" +
                          (s.vectors == 1 ? "" : "s") + " of " + std::to_string(s.dimensions) +
                          " dimensions");
        }
      } else {
        lines.push_back("output: " + Quote(c.output_text(), width));
      }
      if (c.has_timings()) {
        std::snprintf(buf, sizeof buf, "timing: queue %.1f ms, prefill %.1f ms, decode %.1f ms",
                      c.timings().queue_ms(), c.timings().prefill_ms(), c.timings().decode_ms());
        lines.push_back(buf);
      }
      break;
    }
    case proto::Event::kToolCall:
      lines.push_back(
          e.tool_call().name() + " " + Excerpt(e.tool_call().arguments_json(), width) +
          (e.tool_call().call_id().empty() ? "" : "  [" + e.tool_call().call_id() + "]"));
      break;
    case proto::Event::kToolResult:
      lines.push_back(e.tool_result().name() + (e.tool_result().is_error() ? " (error)" : "") +
                      ": " + Quote(e.tool_result().content(), width));
      break;
    case proto::Event::kContextChunk:
      lines.push_back(e.context_chunk().source() + " " + e.context_chunk().chunk_id() + ": " +
                      Quote(e.context_chunk().content(), width));
      break;
    case proto::Event::kTemplateVar:
      lines.push_back(e.template_var().name() + " = " + Quote(e.template_var().value(), width));
      break;
    case proto::Event::kClockRead:
      lines.push_back(e.clock_read().clock() + " " +
                      (e.clock_read().text().empty() ? FormatTime(e.clock_read().value_ns())
                                                     : e.clock_read().text()));
      break;
    case proto::Event::kOutput:
      lines.push_back(
          std::string(e.output().stream() == proto::Output::STDERR ? "stderr " : "stdout ") +
          Quote(e.output().data(), width));
      break;
    case proto::Event::kNote:
      lines.push_back((e.note().topic().empty() ? "" : "[" + e.note().topic() + "] ") +
                      Excerpt(e.note().text(), width));
      break;
    case proto::Event::kRunEnd:
      lines.push_back(HowName(e.run_end()) +
                      (e.run_end().reason().empty() ? "" : ": " + e.run_end().reason()));
      break;
    default:
      lines.push_back("(unknown event kind)");
  }
  return lines;
}

// The text view's opening lines: the run, its command and folder, what made it, the model
// and engine it recorded, its counts and the newest verdict per machine kind.
void PrintRunHeader(const std::string& id, const store::RunSummary& summary,
                    const proto::RunHeader& header,
                    const std::vector<store::Verification>& verifications) {
  const int64_t start = header.start_time_ns();
  std::string status(store::RunStatusName(summary.status));
  std::printf("run %s  %s  started %s\n", EscapeForDisplay(id).c_str(), status.c_str(),
              FormatTime(start).c_str());
  std::string command;
  for (const auto& a : header.argv()) command += (command.empty() ? "" : " ") + a;
  // Everything printed from the run goes through EscapeForDisplay: an agent's argv, output
  // or tool names must not be able to move the cursor or recolour the terminal.
  auto shown = [](const std::string& s) { return EscapeForDisplay(s, kNoLimit); };
  if (!command.empty()) std::printf("command: %s\n", shown(command).c_str());
  if (!header.cwd().empty()) std::printf("cwd: %s\n", shown(header.cwd()).c_str());
  if (!header.label().empty()) std::printf("label: %s\n", shown(header.label()).c_str());
  if (header.has_rerun()) {
    const auto& r = header.rerun();
    std::string line =
        (r.mode() == "fork" ? "fork of run " : "rerun of run ") + r.parent_run_id() +
        (r.live_from_call() ? ", live from call " + std::to_string(r.live_from_call())
                            : std::string()) +
        (r.strict() ? ", strict" : "") +
        (r.divergence().empty() ? ", followed the recording" : "; diverged: " + r.divergence());
    std::printf("%s\n", shown(line).c_str());
  }
  const auto& m = header.model();
  if (!m.architecture().empty() || !m.weights_sha256().empty()) {
    std::printf("model: %s\n", shown(m.model_name() + " " + m.architecture() + " " + m.dtype() +
                                     ", weights sha256 " + m.weights_sha256().substr(0, 16))
                                   .c_str());
  }
  const auto& eng = header.engine();
  std::string engine;
  auto add = [&engine](const std::string& label, const std::string& value) {
    if (!value.empty()) engine += (engine.empty() ? "" : ", ") + label + value;
  };
  add("trace ", eng.version());
  add("revision ", eng.git_revision());
  add("", eng.compiler());
  add("numerics ", eng.numerics());
  add("device ", header.device().description());
  if (!engine.empty()) std::printf("engine: %s\n", shown(engine).c_str());
  std::printf("events: %lld, model calls: %lld, sampled tokens: %lld\n",
              static_cast<long long>(summary.events), static_cast<long long>(summary.model_calls),
              static_cast<long long>(summary.sampled_tokens));
  // The newest verdict of `trace verify` per machine kind.
  for (const store::Verification& v : ui::NewestPerMachine(verifications)) {
    std::printf("verified: %s on %s, %s by trace %s%s\n", shown(v.verdict).c_str(),
                shown(v.machine).c_str(), FormatTime(v.time_ns).c_str(), shown(v.build).c_str(),
                v.first_divergence.empty() ? "" : ("; " + shown(v.first_divergence)).c_str());
  }
  std::printf("\n");
}

// After the text view of a run without a RunEnd: whether it is being recorded still, or
// its recorder died.
void PrintNoRunEnd(const store::RunSummary& summary) {
  const std::string recorder = "pid " + std::to_string(summary.recorder_pid) + " on " +
                               EscapeForDisplay(summary.recorder_host);
  if (summary.status == store::RunStatus::kRecording) {
    std::printf("\n(no RunEnd yet: still being recorded by %s)\n", recorder.c_str());
  } else if (summary.status == store::RunStatus::kCrashed) {
    std::printf(
        "\n(no RunEnd: the recorder, %s, died; the run holds every event it "
        "committed)\n",
        recorder.c_str());
  } else {
    std::printf("\n(no RunEnd: still being recorded, or the recorder died%s)\n",
                summary.recorder_host.empty()
                    ? ""
                    : ("; " + recorder + " cannot be checked from here").c_str());
  }
}

int Run(const Options& options) {
  SilenceProtobufLog();
  store::StoreOptions open;
  open.read_only = true;
  auto st = store::Store::Open(ResolveStorePath(), open);
  if (!st.ok()) return ReportError(st.status());
  auto id = (*st)->ResolveRunId(options.run);
  if (!id.ok()) return ReportError(id.status());
  auto summary = (*st)->GetRunSummary(*id);
  if (!summary.ok()) return ReportError(summary.status());
  auto header = (*st)->LoadHeader(*id);
  if (!header.ok()) return ReportError(header.status());
  auto it = (*st)->ReadEvents(*id);
  if (!it.ok()) return ReportError(it.status());

  std::vector<store::Verification> verifications;  // every verdict of the run, newest first
  {
    auto queue = (*st)->OpenVerifyQueue();
    if (!queue.ok()) return ReportError(queue.status());
    auto rows = (*queue)->RunVerifications(*id);
    if (!rows.ok()) return ReportError(rows.status());
    verifications = std::move(*rows);
  }

  const int64_t start = header->start_time_ns();
  std::vector<Status> bad_rows;
  nlohmann::json events = nlohmann::json::array();
  if (!options.json) PrintRunHeader(*id, *summary, *header, verifications);
  store::EventRecord rec;
  while ((*it)->Next(&rec)) {
    if (!rec.status.ok()) {
      bad_rows.push_back(rec.status);
      if (options.json) {
        events.push_back({{"seq", rec.seq}, {"error", rec.status.message()}});
      } else {
        std::printf("            #%-4" PRIu64 " (unreadable: %s)\n", rec.seq,
                    EscapeForDisplay(rec.status.message(), kNoLimit).c_str());
      }
      continue;
    }
    const auto& e = rec.event;
    if (options.json) {
      events.push_back(ui::EventSummaryJson(e, start));
      continue;
    }
    auto lines = Describe(e, options.width);
    // Excerpts are escaped already; this catches the short fields (names, ids, topics).
    for (std::string& line : lines) line = EscapeForDisplay(line, kNoLimit);
    std::printf("%+10.3fs  #%-4" PRIu64 " %-13s %s\n", (e.wall_time_ns() - start) / 1e9, e.seq(),
                store::EventKindName(e).c_str(), lines[0].c_str());
    for (size_t i = 1; i < lines.size(); ++i) std::printf("%31s%s\n", "", lines[i].c_str());
  }
  if (!(*it)->status().ok()) return ReportError((*it)->status());
  if (options.json) {
    nlohmann::json out = ui::RunJson(*id, *summary, *header);
    out["events"] = std::move(events);
    out["verifications"] = nlohmann::json::array();
    for (const store::Verification& v : verifications) {
      out["verifications"].push_back(ui::VerificationJson(v));
    }
    PrintJson(std::cout, out, 2);
  } else if (summary->end_time_ns == 0) {
    PrintNoRunEnd(*summary);
  }
  std::fflush(stdout);
  for (const auto& s : bad_rows) ReportError(s);
  return bad_rows.empty() ? kExitOk : kExitError;
}

void Setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("show", "Show the timeline of one run");
  cmd->add_option("run", options->run, "Run id or unique prefix")->required()->type_name("RUN");
  cmd->add_flag("--json", options->json,
                "Print the timeline as JSON (a model call with its whole rendered prompt)");
  cmd->add_option("--width", options->width, "Characters of prompt/output excerpts")
      ->type_name("N");
  cmd->callback([options, exit_code] { *exit_code = Run(*options); });
}

TRACE_REGISTER_COMMAND(35, Setup);

}  // namespace
}  // namespace trace::cli::cmd_show
