// `trace push RUN... --to STORE` and `trace pull RUN... --from STORE`: copy runs between
// stores (a SQLite file and a PostgreSQL database, either way) under the same run ids,
// losslessly: the copy exports exactly as the original. `push --redact` copies with
// secrets replaced (the export's redactor: redact/), for a store others read.
#include <unistd.h>

#include <iostream>

#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/json_print.h"
#include "cli/command.h"
#include "exporters/run_data.h"
#include "redact/rules.h"
#include "store/copy.h"
#include "store/store.h"

extern char** environ;

namespace trace::cli::cmd_push {
namespace {

struct Options {
  bool push = true;
  std::vector<std::string> ids;
  std::string other;  // --to (push) or --from (pull)
  bool redact = false;
  std::string rules_file;
  bool json = false;
};

int Run(const Options& o) {
  if (!o.rules_file.empty() && !o.redact) {
    return ReportError(InvalidArgument("--redact-rules needs --redact"));
  }
  redact::RuleSet rules = redact::RuleSet::Defaults();
  if (!o.rules_file.empty()) {
    if (Status s = rules.AddRulesFile(o.rules_file); !s.ok()) return ReportError(s);
  }
  rules.AddSecretEnvironment(environ);
  SilenceProtobufLog();

  const std::string here = ResolveStorePath();
  const std::string& from_location = o.push ? here : o.other;
  const std::string& to_location = o.push ? o.other : here;
  store::StoreOptions read;
  read.read_only = true;
  read.create_if_missing = false;
  auto from = store::Store::Open(from_location, read);
  if (!from.ok()) return ReportError(from.status());
  // Every id resolved, and every run finished, before anything is copied.
  std::vector<std::string> ids;
  for (const std::string& id : o.ids) {
    auto full = (*from)->ResolveRunId(id);
    if (!full.ok()) return ReportError(full.status());
    auto summary = (*from)->GetRunSummary(*full);
    if (!summary.ok()) return ReportError(summary.status());
    if (summary->status == store::RunStatus::kRecording) {
      return ReportError(FailedPrecondition("run " + *full + " in " + (*from)->path() +
                                            " is still being recorded; copy it once it ends"));
    }
    ids.push_back(*full);
  }
  auto to = store::Store::Open(to_location);
  if (!to.ok()) return ReportError(to.status());

  nlohmann::json report = nlohmann::json::array();
  int failures = 0;
  for (const std::string& id : ids) {
    nlohmann::json entry = {{"run_id", id}, {"from", (*from)->path()}, {"to", (*to)->path()}};
    auto run = exporters::LoadRun(**from, id, o.redact ? &rules : nullptr);
    Status st = run.status();
    if (st.ok()) st = store::WriteRunCopy(**to, run->header, run->events);
    if (st.code() == StatusCode::kAlreadyExists) {
      entry["result"] = "already there";
      if (!Globals().quiet && !o.json) {
        std::cerr << "trace: run " << EscapeForDisplay(id) << " is already in "
                  << EscapePathForDisplay((*to)->path()) << "; skipped\n";
      }
    } else if (!st.ok()) {
      ReportError(st);
      entry["result"] = "failed";
      entry["error"] = st.message();
      ++failures;
    } else {
      entry["result"] = "copied";
      entry["events"] = run->events.size();
      if (o.redact) entry["redacted_values"] = run->redaction.replacements();
      if (!Globals().quiet && !o.json) {
        std::cout << (o.push ? "pushed " : "pulled ") << EscapeForDisplay(id) << " ("
                  << run->events.size() << " events"
                  << (o.redact ? ", " + std::to_string(run->redaction.replacements()) +
                                     " value(s) redacted"
                               : std::string())
                  << ") " << (o.push ? "to " : "from ")
                  << EscapePathForDisplay(o.push ? (*to)->path() : (*from)->path()) << "\n";
      }
    }
    report.push_back(std::move(entry));
  }
  if (o.json) PrintJson(std::cout, report, 2);
  return failures ? kExitError : kExitOk;
}

void Setup(CLI::App& app, int* exit_code, bool push) {
  auto o = std::make_shared<Options>();
  o->push = push;
  auto* cmd = app.add_subcommand(
      push ? "push" : "pull",
      push ? "Copy runs from this store (--store) to another store: a SQLite file or a\n"
             "PostgreSQL database (postgresql://USER@HOST[:PORT]/DB). The same run ids, every\n"
             "event as recorded; --redact replaces secrets first (as `trace export` does)"
           : "Copy runs from another store (a SQLite file or postgresql://USER@HOST/DB) into\n"
             "this store (--store): the same run ids, every event as recorded");
  cmd->add_option("runs", o->ids, "Run ids or unique prefixes")->required()->type_name("RUN");
  cmd->add_option(push ? "--to" : "--from", o->other,
                  push ? "Destination store: a file path, sqlite://PATH or postgresql:// URL"
                       : "Source store: a file path, sqlite://PATH or postgresql:// URL")
      ->required()
      ->type_name("STORE");
  if (push) {
    cmd->add_flag("--redact", o->redact,
                  "Replace API keys, tokens, private keys and secret-looking environment "
                  "values in the copy (the copy then replays at the tokens level at most)");
    cmd->add_option("--redact-rules", o->rules_file,
                    "With --redact, also redact what FILE's rules match: lines 'NAME REGEX'")
        ->type_name("FILE");
  }
  cmd->add_flag("--json", o->json, "Print what was copied as JSON on stdout");
  cmd->callback([o, exit_code] { *exit_code = Run(*o); });
}

TRACE_REGISTER_COMMAND(62, [](CLI::App& app, int* exit_code) { Setup(app, exit_code, true); });
TRACE_REGISTER_COMMAND(63, [](CLI::App& app, int* exit_code) { Setup(app, exit_code, false); });

}  // namespace
}  // namespace trace::cli::cmd_push
