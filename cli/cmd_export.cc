// `trace export RUN`: the whole run for other tools, redacted by default: the trace-run
// JSON (--format json), an OTLP trace as OTLP/JSON or protobuf (--format otlp-json|otlp),
// or POSTed to an OTLP/HTTP collector (--otlp-endpoint). docs/export.md.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_print.h"
#include "cli/command.h"
#include "exporters/otlp_http.h"
#include "exporters/otlp_json.h"
#include "exporters/otlp_trace.h"
#include "exporters/replay_levels.h"
#include "exporters/run_json.h"
#include "redact/rules.h"
#include "store/store.h"

extern char** environ;

namespace trace::cli::cmd_export {
namespace {

struct Options {
  std::string run;
  std::string format = "json";
  std::string output;  // empty: stdout
  std::string endpoint;
  std::vector<std::string> headers;
  int timeout_s = 10;
  bool content = false;
  bool no_redact = false;
  std::string rules_file;
  std::string replay_report;
  bool json = false;
  bool format_given = false;
};

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IOError(path + ": read error");
  return ss.str();
}

// Writes `data` to `path` through a temporary file, so a failure leaves no partial file.
Status WriteFileAtomically(const std::string& path, const std::string& data) {
  std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IOError(tmp + ": cannot open for writing: " + std::strerror(errno));
    out << data;
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      return IOError(tmp + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return IOError(path + ": cannot write: " + why);
  }
  return Status::Ok();
}

// "12 values in 3 fields (sk-api-key x2, env:DB_PASSWORD x1); calls at seq 4, 6 lost
// their token ids" or "nothing matched".
std::string RedactionSummary(const exporters::RunData& run) {
  if (!run.redacted) return "not redacted (--no-redact)";
  const auto& r = run.redaction;
  if (r.empty())
    return "redacted: nothing matched " + std::to_string(run.redaction_rules.size()) + " rules";
  std::string s = "redacted " + std::to_string(r.replacements()) + " value(s) in " +
                  std::to_string(r.fields.size()) + " field(s) (";
  bool first = true;
  for (const auto& [rule, n] : r.RuleTotals()) {
    s += (first ? "" : ", ") + rule + " x" + std::to_string(n);
    first = false;
  }
  s += ")";
  std::set<uint64_t> seqs(r.prompt_tokens_removed.begin(), r.prompt_tokens_removed.end());
  seqs.insert(r.sampled_tokens_removed.begin(), r.sampled_tokens_removed.end());
  if (!seqs.empty()) s += "; " + std::to_string(seqs.size()) + " model call(s) lost token ids";
  return s;
}

int Run(const Options& o) {
  const bool otlp_format = o.format == "otlp" || o.format == "otlp-json";
  if (o.format != "json" && !otlp_format) {
    return ReportError(InvalidArgument("export format '" + o.format +
                                       "' is not supported (supported: json, otlp-json, otlp)"));
  }
  const bool post = !o.endpoint.empty();
  if (post && o.format_given && !otlp_format) {
    return ReportError(InvalidArgument("--otlp-endpoint sends OTLP; --format " + o.format +
                                       " cannot go with it (use otlp-json or otlp, or drop it)"));
  }
  if (!otlp_format && !post && (o.content || !o.replay_report.empty())) {
    return ReportError(InvalidArgument(
        std::string(o.content ? "--content" : "--replay-report") +
        " applies to OTLP output (--format otlp-json|otlp or --otlp-endpoint); the json export "
        "always holds every event in full"));
  }
  if (o.no_redact && !o.rules_file.empty()) {
    return ReportError(InvalidArgument("--redact-rules and --no-redact contradict each other"));
  }
  if (!post && !o.headers.empty()) {
    return ReportError(InvalidArgument("--otlp-header needs --otlp-endpoint"));
  }
  // What gets written where: a file, stdout, or (with only --otlp-endpoint) nothing.
  const bool write_document = !post || o.format_given || !o.output.empty();
  const bool to_stdout = write_document && o.output.empty();
  if (o.json && to_stdout) {
    return ReportError(
        InvalidArgument("--json prints a summary and needs the export to go to "
                        "-o FILE or --otlp-endpoint, not stdout"));
  }
  if (to_stdout && o.format == "otlp" && isatty(STDOUT_FILENO)) {
    return ReportError(InvalidArgument(
        "refusing to write binary protobuf to a terminal: use -o FILE or redirect stdout"));
  }
  exporters::HttpHeaders headers;
  if (post) {
    auto h =
        exporters::ResolveOtlpHeaders(std::getenv("OTEL_EXPORTER_OTLP_HEADERS"),
                                      std::getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS"), o.headers);
    if (!h.ok()) return ReportError(h.status());
    headers = std::move(*h);
    auto url = exporters::OtlpTracesUrl(o.endpoint);
    if (!url.ok()) return ReportError(url.status());
  }
  redact::RuleSet rules = redact::RuleSet::Defaults();
  if (!o.rules_file.empty()) {
    if (Status s = rules.AddRulesFile(o.rules_file); !s.ok()) return ReportError(s);
  }
  rules.AddSecretEnvironment(environ);

  SilenceProtobufLog();
  store::StoreOptions open;
  open.create_if_missing = false;
  open.read_only = true;
  auto st = store::Store::Open(ResolveStorePath(), open);
  if (!st.ok()) return ReportError(st.status());
  auto id = (*st)->ResolveRunId(o.run);
  if (!id.ok()) return ReportError(id.status());

  exporters::ReplayLevels replay;
  if (!o.replay_report.empty()) {
    auto text = ReadWholeFile(o.replay_report);
    if (!text.ok()) return ReportError(text.status());
    auto parsed = exporters::ParseReplayReport(*text, *id, o.replay_report);
    if (!parsed.ok()) return ReportError(parsed.status());
    replay = std::move(*parsed);
  }

  auto run = exporters::LoadRun(**st, *id, o.no_redact ? nullptr : &rules);
  if (!run.ok()) return ReportError(run.status());

  std::string document;
  exporters::OtlpRequest request;
  if (otlp_format || post) {
    exporters::OtlpOptions oo;
    oo.content = o.content;
    oo.replay = o.replay_report.empty() ? nullptr : &replay;
    auto built = exporters::BuildOtlpRequest(*run, oo);
    if (!built.ok()) return ReportError(built.status());
    request = std::move(*built);
  }
  if (write_document) {
    if (o.format == "json") {
      std::ostringstream out;
      if (Status s = exporters::WriteRunJson(*run, out); !s.ok()) return ReportError(s);
      document = out.str();
    } else if (o.format == "otlp-json") {
      auto j = exporters::OtlpToJson(request);
      if (!j.ok()) return ReportError(j.status());
      document = std::move(*j);
    } else if (!request.SerializeToString(&document)) {
      return ReportError(Internal("OTLP protobuf encoding of run " + *id + " failed"));
    }
    if (to_stdout) {
      std::cout.write(document.data(), static_cast<std::streamsize>(document.size()));
      std::cout.flush();
      if (!std::cout) return ReportError(IOError("writing the export of run " + *id + " failed"));
    } else if (Status s = WriteFileAtomically(o.output, document); !s.ok()) {
      return ReportError(s);
    }
  }
  nlohmann::json summary = {{"run_id", *id}, {"redaction", exporters::RedactionJson(*run)}};
  if (write_document) {
    summary["format"] = o.format;
    summary["output"] = to_stdout ? "-" : o.output;
    summary["bytes"] = document.size();
  }
  if (post) {
    exporters::OtlpHttpOptions ho;
    ho.endpoint = o.endpoint;
    ho.headers = headers;
    ho.timeout_s = o.timeout_s;
    for (const char* var :
         {"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"}) {
      const char* ca = std::getenv(var);
      if (ca && *ca && ho.ca_file.empty()) ho.ca_file = ca;
    }
    if (!Globals().quiet) {
      ho.progress = [](int batch, int batches, int spans) {
        if (batches > 1) {
          std::fprintf(stderr, "trace: sending batch %d/%d (%d spans)\n", batch + 1, batches,
                       spans);
        }
      };
    }
    auto sent = exporters::PostOtlp(request, ho);
    if (!sent.ok()) return ReportError(sent.status());
    summary["otlp"] = {{"url", sent->url},           {"spans", sent->spans},
                       {"requests", sent->requests}, {"bytes", sent->bytes},
                       {"retries", sent->retries},   {"trace_id", exporters::OtlpTraceIdHex(*id)}};
    if (!o.json && !Globals().quiet) {
      std::fprintf(stderr,
                   "trace: exported run %s to %s: %lld spans in %d request(s), trace id %s\n",
                   id->c_str(), sent->url.c_str(), static_cast<long long>(sent->spans),
                   sent->requests, exporters::OtlpTraceIdHex(*id).c_str());
    }
  }
  if (o.json) {
    PrintJson(std::cout, summary, 2);
  } else if (!Globals().quiet) {
    std::fprintf(stderr, "trace: %s\n", RedactionSummary(*run).c_str());
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write a run for other tools: trace-run JSON, or an OTLP trace (GenAI semantic "
      "conventions) to a file or a collector.\nSecrets are redacted unless --no-redact. "
      "docs/export.md");
  cmd->add_option("run", o->run, "Run id or unique prefix")->required()->type_name("RUN");
  cmd->add_option("--format", o->format,
                  "json: every event in full (default); otlp-json: OTLP/JSON "
                  "ExportTraceServiceRequest; otlp: the same as protobuf")
      ->type_name("FORMAT");
  cmd->add_option("-o,--output", o->output, "Write to FILE instead of stdout")->type_name("FILE");
  cmd->add_option("--otlp-endpoint", o->endpoint,
                  "POST the trace as OTLP/HTTP protobuf to URL (/v1/traces appended unless "
                  "present), e.g. http://localhost:4318; https verifies against the system CAs or "
                  "$OTEL_EXPORTER_OTLP_CERTIFICATE")
      ->type_name("URL");
  cmd->add_option("--otlp-header", o->headers,
                  "HTTP header for --otlp-endpoint (repeatable); added to "
                  "OTEL_EXPORTER_OTLP_HEADERS / OTEL_EXPORTER_OTLP_TRACES_HEADERS")
      ->type_name("K=V")
      ->allow_extra_args(false);  // one K=V per --otlp-header, so RUN may follow it
  cmd->add_option("--otlp-timeout", o->timeout_s, "Seconds to wait per OTLP/HTTP attempt")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 3600));
  cmd->add_flag("--content", o->content,
                "OTLP: include content (messages, system instructions, tool definitions, tool "
                "arguments and results, retrieved chunks, agent output)");
  cmd->add_option("--replay-report", o->replay_report,
                  "OTLP: attach replay levels from FILE (written by trace replay RUN --json)")
      ->type_name("FILE");
  cmd->add_flag("--no-redact", o->no_redact,
                "Export secrets as recorded (default: redact API keys, tokens, private keys, "
                "secret environment values)");
  cmd->add_option("--redact-rules", o->rules_file,
                  "Also redact what FILE's rules match: lines 'NAME REGEX' (PCRE2)")
      ->type_name("FILE");
  cmd->add_flag("--json", o->json,
                "Print a JSON summary (where it went, what was redacted) on stdout");
  cmd->callback([o, cmd, exit_code] {
    o->format_given = cmd->count("--format") > 0;
    if (!o->format_given && !o->endpoint.empty()) o->format = "otlp";
    *exit_code = Run(*o);
  });
}

TRACE_REGISTER_COMMAND(50, Setup);

}  // namespace
}  // namespace trace::cli::cmd_export
