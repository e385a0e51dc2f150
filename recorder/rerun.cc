#include "recorder/rerun.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/escape.h"
#include "engine/model_files.h"
#include "recorder/api/json_body.h"
#include "recorder/secrets.h"

namespace trace::recorder {

namespace {

Result<std::string> ReadEditBody(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("--file " + EscapeForDisplay(path) + ": cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  nlohmann::json parsed = ParseJsonOrDiscarded(s.str());
  if (!parsed.is_object()) {
    return InvalidArgument("--file " + EscapeForDisplay(path) +
                           ": not a JSON object (a request body in the agent's API)");
  }
  return s.str();
}

// What serves the calls that go live (rerun.h); fills the header like `trace record`.
Result<std::unique_ptr<Server>> MakeRerunServer(const RerunOptions& o, const Cassette& cassette,
                                                const ServerOptions& so, proto::RunHeader* header,
                                                std::string* live_backend) {
  SessionOptions session = o.session;
  if (!session.upstream.empty()) {
    *live_backend = "upstream " + StripUrlCredentials(session.upstream);
    return MakeServer(session, so, header);
  }
  if (session.model_dir.empty() && cassette.recorded_upstream()) {
    *live_backend = "none (offline: the run was recorded through --upstream)";
    (*header->mutable_attributes())["upstream"] =
        cassette.header().attributes().count("upstream")
            ? cassette.header().attributes().at("upstream")
            : std::string();
    return Server::CreateOffline(cassette.model_name(), so);
  }
  if (session.model_dir.empty()) {
    session.model_dir = cassette.header().model().model_dir();
    Result<bool> present =
        session.model_dir.empty() ? Result<bool>(false) : engine::IsModelPath(session.model_dir);
    if (!present.ok() || !*present) {
      return NotFound("the model folder run " + cassette.run_id() + " was recorded with ('" +
                      EscapeForDisplay(session.model_dir) +
                      "') is gone: pass --model DIR or --upstream URL");
    }
  }
  *live_backend = "local engine (" + session.model_dir + ")";
  return MakeServer(session, so, header);
}

}  // namespace

Result<RerunOutcome> RerunCommand(const RerunOptions& o, const std::vector<std::string>& argv_in) {
  auto started = std::chrono::steady_clock::now();
  if (o.live_from < 0 || o.edit_call < 0) {
    return InvalidArgument("--live-from and --edit-call take a model call number (1, 2, ...)");
  }
  if (o.edit_call > 0 && o.live_from > 0 && o.edit_call < o.live_from) {
    return InvalidArgument("--edit-call " + std::to_string(o.edit_call) +
                           " comes before --live-from " + std::to_string(o.live_from) +
                           ": an edited call runs live");
  }
  if (o.edit_call > 0 && o.edit_body_path.empty()) {
    return InvalidArgument("--edit-call needs --file BODY.json (the request body to send)");
  }
  if (o.edit_call == 0 && !o.edit_body_path.empty()) {
    return InvalidArgument("--file needs --edit-call K (which call it replaces)");
  }
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store,
                         store::Store::Open(o.session.store_path));
  TRACE_ASSIGN_OR_RETURN(std::string run_id, store->ResolveRunId(o.run));
  TRACE_ASSIGN_OR_RETURN(Cassette cassette, Cassette::Load(*store, run_id));
  const int live_from = o.live_from > 0 ? o.live_from : o.edit_call;
  if (live_from > static_cast<int>(cassette.calls().size()) + 1) {
    return InvalidArgument("--live-from " + std::to_string(live_from) + ": run " + run_id +
                           " has " + std::to_string(cassette.calls().size()) + " model calls");
  }
  CassetteGateOptions gate_options;
  gate_options.live_from = live_from;
  gate_options.strict = o.strict;
  gate_options.tools_recorded_only = o.tools_recorded_only;
  gate_options.edit_call = o.edit_call;
  if (o.edit_call > 0) {
    TRACE_ASSIGN_OR_RETURN(gate_options.edit_body, ReadEditBody(o.edit_body_path));
  }
  std::vector<std::string> argv = argv_in;
  if (argv.empty()) argv.assign(cassette.header().argv().begin(), cassette.header().argv().end());
  if (argv.empty()) {
    return InvalidArgument("run " + run_id +
                           " recorded no command: give one, trace rerun RUN -- CMD ARGS...");
  }

  // Live calls use --seed as the run seed, else the recording's (the same answers when
  // nothing else changed).
  const uint64_t run_seed = o.session.seed ? *o.session.seed : cassette.header().run_seed();
  const ServerOptions so = ServerOptionsFor(o.session, run_seed);
  proto::RunHeader header = NewRunHeader(o.session, argv, run_seed);
  RerunOutcome out;
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<Server> server,
                         MakeRerunServer(o, cassette, so, &header, &out.live_backend));
  proto::RerunOrigin* origin = header.mutable_rerun();
  origin->set_parent_run_id(run_id);
  origin->set_mode(live_from > 0 ? "fork" : "cassette");
  origin->set_live_from_call(static_cast<uint64_t>(live_from));
  origin->set_strict(o.strict);
  origin->set_tools(o.tools_recorded_only ? "recorded-only" : "live");
  origin->set_edit_call(static_cast<uint64_t>(o.edit_call));

  std::atomic<int> agent_pid{0};
  gate_options.on_stop = [&agent_pid] {
    // --strict: the agent is stopped at the first difference (it started it; we end it).
    if (int pid = agent_pid.load(); pid > 0) kill(pid, SIGTERM);
  };
  auto gate = std::make_unique<CassetteGate>(cassette, gate_options);
  RecordHooks hooks;
  hooks.on_started = [&agent_pid](int pid) { agent_pid = pid; };
  hooks.before_end = [&](proto::RunHeader* h) {
    gate->Finish();
    if (auto d = gate->divergence()) {
      h->mutable_rerun()->set_diverged_at_call(
          static_cast<uint64_t>(d->kind == Divergence::kFewerCalls ? d->expected_call : d->call));
      h->mutable_rerun()->set_divergence(d->Summary());
    }
  };
  hooks.gate = gate.get();
  // The agent's OPENAI_MODEL: the name it asked for in the recording when the live side has
  // none to offer (a proxy), so it need not ask an upstream that may be gone.
  SessionOptions session = o.session;
  if (session.served_model_names.empty() && server->model_name().empty()) {
    session.served_model_names = {cassette.model_name()};
  }
  TRACE_ASSIGN_OR_RETURN(
      out.record, RunAgentRecorded(session, argv, *store, *server, std::move(header), so.api_key,
                                   hooks, started));
  out.parent_run_id = run_id;
  out.mode = live_from > 0 ? "fork" : "cassette";
  out.live_from = live_from;
  out.strict = o.strict;
  out.stats = gate->stats();
  out.divergence = gate->divergence();
  if (const proto::RunEnd* end = cassette.end(); end && end->how() == proto::RunEnd::EXITED) {
    out.recorded_exit = end->exit_code();
  }
  const bool same_exit = !out.recorded_exit || *out.recorded_exit == out.record.exit_status;
  out.exit_code = out.divergence || (live_from == 0 && !same_exit) ? 1 : 0;
  return out;
}

std::string RerunReportText(const RerunOutcome& o) {
  std::ostringstream s;
  const CassetteStats& st = o.stats;
  s << "re-ran run " << o.parent_run_id << " as run " << o.record.run_id << " ("
    << (o.mode == "fork" ? "fork at call " + std::to_string(o.live_from) : "cassette")
    << (o.strict ? ", strict" : "") << "): " << st.calls << " model calls, " << st.calls_answered
    << " answered from the recording, " << st.calls_live << " live ("
    << EscapeForDisplay(o.live_backend) << "); " << st.tools_answered
    << " tool results from the recording, " << st.tools_live << " tools run live; "
    << st.clocks_answered << " clock reads from the recording.\n";
  if (o.divergence) {
    s << "diverged: " << o.divergence->Describe();
    if (o.strict) s << "stopped at the first difference (--strict).\n";
  } else if (o.mode == "fork") {
    s << "calls 1.." << (o.live_from - 1) << " followed the recording; from call " << o.live_from
      << " on the run went live.\n";
  } else {
    s << "followed the recording: every model call asked what was recorded ("
      << st.recorded_calls - st.unused_calls << " of " << st.recorded_calls << ").\n";
  }
  s << "agent exit status " << o.record.exit_status;
  if (o.recorded_exit) {
    s << (*o.recorded_exit == o.record.exit_status
              ? " (as recorded)"
              : " (recorded: " + std::to_string(*o.recorded_exit) + ")");
  }
  s << ". trace diff " << o.parent_run_id << " " << o.record.run_id << " shows what differs.\n";
  return s.str();
}

nlohmann::json RerunReportJson(const RerunOutcome& o) {
  const CassetteStats& st = o.stats;
  nlohmann::json j{
      {"parent_run", o.parent_run_id},
      {"run", o.record.run_id},
      {"mode", o.mode},
      {"live_from", o.live_from},
      {"strict", o.strict},
      {"live_backend", o.live_backend},
      {"followed", !o.divergence.has_value() && o.exit_code == 0},
      {"exit_code", o.exit_code},
      {"agent_exit_status", o.record.exit_status},
      {"recorded_exit_status",
       o.recorded_exit ? nlohmann::json(*o.recorded_exit) : nlohmann::json()},
      {"calls",
       {{"made", st.calls},
        {"answered_from_recording", st.calls_answered},
        {"live", st.calls_live},
        {"recorded", st.recorded_calls},
        {"recorded_unused", st.unused_calls}}},
      {"tools", {{"answered_from_recording", st.tools_answered}, {"live", st.tools_live}}},
      {"clock_reads_answered_from_recording", st.clocks_answered},
      {"divergence", o.divergence ? o.divergence->Json() : nlohmann::json()}};
  return j;
}

}  // namespace trace::recorder
