#include "recorder/session.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/model_init.h"
#include "recorder/child.h"
#include "recorder/secrets.h"
#include "recorder/server.h"
#include "store/store.h"

extern char** environ;

namespace trace::recorder {
namespace {

void Log(const SessionOptions& o, const std::string& line) {
  if (o.log) {
    o.log(line);
  } else {
    std::cerr << "trace: " << line << "\n";
  }
}

uint64_t RandomU64() {
  uint64_t v = 0;
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(&v), sizeof v);
  return v;
}

std::string RandomKey() {
  char buf[40];
  snprintf(buf, sizeof buf, "trace-%016llx%016llx", static_cast<unsigned long long>(RandomU64()),
           static_cast<unsigned long long>(RandomU64()));
  return buf;
}

Result<std::string> ResolveModelDir(const SessionOptions& o) {
  if (!o.model_dir.empty()) return o.model_dir;
  std::string dir = engine::DefaultDemoModelDir();
  std::error_code ec;
  bool existed = std::filesystem::exists(dir + "/config.json", ec);
  TRACE_ASSIGN_OR_RETURN(std::string ready, engine::EnsureDemoModel());
  if (!existed) {
    Log(o, "created the built-in demo model (trace model init tiny, seed " +
               std::to_string(engine::kDemoModelSeed) + ") at " + ready);
  } else {
    Log(o, "using the built-in demo model at " + ready);
  }
  return ready;
}

void FillHostFacts(const SessionOptions& o, proto::RunHeader* h) {
  for (const std::string& a : RedactArgv(o.trace_argv)) h->add_trace_argv(a);
  std::error_code ec;
  h->set_cwd(std::filesystem::current_path(ec).string());
  for (const auto& [k, v] : AllowListedEnvironment(environ)) (*h->mutable_env())[k] = v;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) h->set_hostname(host);
  if (struct passwd* pw = getpwuid(getuid())) h->set_user(pw->pw_name);
  h->set_label(o.label);
}

// The run's writer tells the terminal at once when another process keeps the store's
// lock and when the store stops taking writes (the latter even with --quiet).
store::WriterOptions ReportingWriter(const SessionOptions& o) {
  store::WriterOptions w;
  w.on_health = [&o](const store::WriterHealth& h) {
    if (h.state == store::WriterHealth::State::kFailed && o.log) {
      std::cerr << "trace: " << DescribeWriterHealth(h) << std::endl;
    }
    Log(o, DescribeWriterHealth(h));
  };
  return w;
}

}  // namespace

std::vector<std::string> OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string arg;
  while (std::getline(in, arg, '\0')) out.push_back(arg);
  return out;
}

ServerOptions ServerOptionsFor(const SessionOptions& o, uint64_t run_seed) {
  ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key.empty() ? RandomKey() : o.api_key;
  so.limits = o.http_limits;
  so.run_seed = run_seed;
  so.served_model_names = o.served_model_names;
  return so;
}

proto::RunHeader NewRunHeader(const SessionOptions& o, const std::vector<std::string>& argv,
                              uint64_t run_seed) {
  proto::RunHeader header;
  FillHostFacts(o, &header);
  for (const std::string& a : RedactArgv(argv)) header.add_argv(a);
  header.set_run_seed(run_seed);
  return header;
}

Result<std::unique_ptr<Server>> MakeServer(const SessionOptions& o, const ServerOptions& so,
                                           proto::RunHeader* header) {
  if (!o.upstream.empty()) {
    (*header->mutable_attributes())["upstream"] = StripUrlCredentials(o.upstream);
    return Server::CreateProxy(o.upstream, so);
  }
  TRACE_ASSIGN_OR_RETURN(std::string model_dir, ResolveModelDir(o));
  TRACE_ASSIGN_OR_RETURN(LocalBackend backend, LoadLocalBackend(model_dir, o.engine, o.scheduler));
  FillFingerprints(backend, header);
  return Server::CreateLocal(std::move(backend), so);
}

Result<RecordOutcome> RecordCommand(const SessionOptions& o, const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("no command to record: trace record -- CMD ARGS...");
  auto started = std::chrono::steady_clock::now();
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store, store::Store::Open(o.store_path));
  const uint64_t run_seed = o.seed ? *o.seed : RandomU64();
  const ServerOptions so = ServerOptionsFor(o, run_seed);
  proto::RunHeader header = NewRunHeader(o, argv, run_seed);
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, MakeServer(o, so, &header));
  return RunAgentRecorded(o, argv, *store, *server, std::move(header), so.api_key, {}, started);
}

Result<RecordOutcome> RunAgentRecorded(const SessionOptions& o,
                                       const std::vector<std::string>& argv, store::Store& store,
                                       Server& server_ref, proto::RunHeader header,
                                       const std::string& api_key, const RecordHooks& hooks,
                                       std::chrono::steady_clock::time_point started) {
  Server* server = &server_ref;
  // What OPENAI_MODEL names for the agent: the first served name, else the model folder's.
  std::string model_name =
      o.served_model_names.empty() ? server->model_name() : o.served_model_names.front();
  if (hooks.gate != nullptr) server->SetCallGate(hooks.gate);
  TRACE_RETURN_IF_ERROR(server->Start());
  header.set_endpoint(server->origin());

  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<store::RunWriter> writer,
                         store.BeginRun(header, ReportingWriter(o)));
  RunLog log(std::move(writer), header.run_seed());
  server->SetRunLog(&log);

  ChildOptions co;
  co.argv = argv;
  // OpenAI's SDKs append /chat/completions (or /responses) to their base URL, Anthropic's
  // append /v1/messages; the Vercel AI SDK's Anthropic provider appends /messages, which the
  // server serves too.
  co.extra_env = {{"OPENAI_BASE_URL", server->origin() + "/v1"},
                  {"OPENAI_API_KEY", api_key},
                  {"ANTHROPIC_BASE_URL", server->origin()},
                  {"ANTHROPIC_API_KEY", api_key},
                  {"TRACE_RUN_ID", log.run_id()},
                  {"TRACE_ENDPOINT", server->origin()}};
  if (!model_name.empty()) co.extra_env["OPENAI_MODEL"] = model_name;
  if (!getenv("PYTHONUNBUFFERED")) co.extra_env["PYTHONUNBUFFERED"] = "1";
  co.on_output = [&log](int stream, std::string_view data) {
    (void)log.RecordOutput(stream, data);
  };
  co.on_started = [&](int pid) {
    header.set_agent_pid(pid);
    header.set_run_id(log.run_id());
    (void)log.writer().UpdateHeader(header);
    if (hooks.on_started) hooks.on_started(pid);
  };
  Result<ChildExit> child = RunChild(co);
  // In-flight requests finish before the run ends.
  server->Stop();
  if (hooks.before_end) {
    header.set_run_id(log.run_id());
    hooks.before_end(&header);
    (void)log.writer().UpdateHeader(header);
  }

  proto::RunEnd end;
  RecordOutcome out;
  out.run_id = log.run_id();
  const HttpStats http = server->http_stats();
  out.refused_requests =
      static_cast<int64_t>(http.unauthenticated + http.foreign_host + http.foreign_origin);
  out.store_path = store.path();
  if (!child.ok()) {
    end.set_how(proto::RunEnd::RECORDER_ERROR);
    end.set_reason(child.status().message());
    (void)log.writer().End(end);
    return child.status();
  }
  end.set_duration_ms(child->duration_ms);
  if (child->signalled) {
    bool ours = child->forwarded_signal == child->signal;
    end.set_how(ours ? proto::RunEnd::RECORDER_KILLED : proto::RunEnd::SIGNALLED);
    end.set_signal(child->signal);
    end.set_reason(std::string(ours ? "forwarded " : "killed by ") + strsignal(child->signal));
  } else {
    end.set_how(proto::RunEnd::EXITED);
    end.set_exit_code(child->exit_code);
  }
  TRACE_RETURN_IF_ERROR(log.writer().End(end).status());
  out.exit_status = child->ShellStatus();
  out.signalled = child->signalled;
  out.signal = child->signal;
  out.counts = log.counts();
  if (auto summary = store.GetRunSummary(out.run_id); summary.ok()) {
    out.events = summary->events;
    out.stored_bytes = summary->stored_bytes;
  }
  out.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return out;
}

std::string SummaryParagraph(const RecordOutcome& o) {
  std::ostringstream s;
  s << "recorded run " << o.run_id << ": " << o.counts.llm_calls << " model calls, "
    << o.counts.sampled_tokens << " sampled tokens, " << o.counts.tool_calls << " tool calls, "
    << o.counts.tool_results << " tool results, " << o.counts.context_chunks << " context chunks, "
    << o.counts.clock_reads << " clock reads; " << o.events << " events, "
    << (o.stored_bytes + 1023) / 1024 << " KiB in " << o.store_path << ", "
    << static_cast<int64_t>(o.duration_ms) / 1000.0 << " s. ";
  if (o.signalled) {
    s << "The agent was killed by signal " << o.signal << " (" << strsignal(o.signal) << ").";
  } else {
    s << "The agent exited with status " << o.exit_status << ".";
  }
  if (o.counts.rejected_requests > 0) {
    s << " " << o.counts.rejected_requests << " requests were rejected (see trace show).";
  }
  if (o.refused_requests > 0) {
    s << " " << o.refused_requests
      << " requests were refused before authentication (wrong key, Host or Origin).";
  }
  return s.str();
}

Status Serve(const SessionOptions& o, bool record,
             const std::function<void(const std::string& origin)>& on_ready) {
  // Block the stop signals in every thread; this one waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<store::Store> store;
  if (record) {
    TRACE_ASSIGN_OR_RETURN(store, store::Store::Open(o.store_path));
  }
  uint64_t run_seed = o.seed ? *o.seed : RandomU64();
  ServerOptions so = ServerOptionsFor(o, run_seed);
  so.api_key = o.api_key;  // serve: no check when none is given
  proto::RunHeader header;
  FillHostFacts(o, &header);
  header.set_run_seed(run_seed);
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, MakeServer(o, so, &header));
  TRACE_RETURN_IF_ERROR(server->Start());
  header.set_endpoint(server->origin());
  std::unique_ptr<RunLog> log;
  if (record) {
    TRACE_ASSIGN_OR_RETURN(std::unique_ptr<store::RunWriter> writer,
                           store->BeginRun(header, ReportingWriter(o)));
    log = std::make_unique<RunLog>(std::move(writer), run_seed);
    server->SetRunLog(log.get());
    Log(o, "recording everything served as run " + log->run_id() + " in " + store->path());
  }
  if (on_ready) on_ready(server->origin());
  auto started = std::chrono::steady_clock::now();
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server->Stop();
  if (log) {
    proto::RunEnd end;
    end.set_how(proto::RunEnd::EXITED);
    end.set_reason(std::string("trace serve stopped by ") + strsignal(sig));
    end.set_duration_ms(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count());
    TRACE_RETURN_IF_ERROR(log->writer().End(end).status());
    RunCounts c = log->counts();
    Log(o, "run " + log->run_id() + ": " + std::to_string(c.llm_calls) + " model calls, " +
               std::to_string(c.sampled_tokens) + " sampled tokens recorded");
  }
  return Status::Ok();
}

}  // namespace trace::recorder
