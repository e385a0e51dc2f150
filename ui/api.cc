#include "ui/api.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "base/escape.h"
#include "base/hash.h"
#include "engine/model_files.h"
#include "engine/tokenizer/tokenizer.h"
#include "exporters/run_data.h"
#include "exporters/run_json.h"
#include "replayer/diff.h"
#include "store/export.h"
#include "store/verify_queue.h"
#include "ui/replay_jobs.h"
#include "ui/run_json.h"

namespace trace::ui {
namespace {

constexpr std::string_view kPrefix = "/ui/api/";
constexpr int64_t kDefaultRunPage = 50;
constexpr int64_t kDefaultEventPage = 2000;
constexpr int64_t kMaxEventPage = 20000;
// A content search reads every event of the runs it looks at: at most this many per page.
constexpr int kMaxContentScanRuns = 500;

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether any text the run's model saw or produced, or its agent got or printed, holds
// `needle` (lower case; ASCII case folded).
bool EventsContain(const std::vector<proto::Event>& events, const std::string& needle) {
  auto has = [&needle](std::string_view text) {
    return AsciiLower(text).find(needle) != std::string::npos;
  };
  for (const proto::Event& e : events) {
    switch (e.kind_case()) {
      case proto::Event::kLlmCall:
        if (has(e.llm_call().rendered_prompt()) || has(e.llm_call().output_text())) return true;
        break;
      case proto::Event::kToolCall:
        if (has(e.tool_call().arguments_json())) return true;
        break;
      case proto::Event::kToolResult:
        if (has(e.tool_result().content())) return true;
        break;
      case proto::Event::kContextChunk:
        if (has(e.context_chunk().content())) return true;
        break;
      case proto::Event::kTemplateVar:
        if (has(e.template_var().value())) return true;
        break;
      case proto::Event::kOutput:
        if (has(e.output().data())) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kCorruption:
    case StatusCode::kUnsupported:
    case StatusCode::kIOError:
    case StatusCode::kInternal:
    case StatusCode::kAlreadyExists:
    case StatusCode::kOk:
      break;
  }
  return 500;
}

std::string CodeName(StatusCode code) {
  std::string name(StatusCodeName(code));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

std::string Param(const ApiRequest& r, const std::string& name) {
  auto it = r.params.find(name);
  return it == r.params.end() ? std::string() : it->second;
}

// An integer parameter in [min, max], `fallback` when absent.
Result<int64_t> IntParam(const ApiRequest& r, const std::string& name, int64_t fallback,
                         int64_t min, int64_t max) {
  const std::string text = Param(r, name);
  if (text.empty()) return fallback;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    return InvalidArgument("parameter " + name + ": '" + EscapeForDisplay(text, 40) +
                           "' is not a whole number from " + std::to_string(min) + " to " +
                           std::to_string(max));
  }
  return v;
}

// A time parameter: "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM[:SS]" (UTC), or Unix nanoseconds.
Result<int64_t> TimeParam(const ApiRequest& r, const std::string& name) {
  const std::string text = Param(r, name);
  if (text.empty()) return 0;
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      text.size() > 10) {
    return IntParam(r, name, 0, 0, INT64_MAX);
  }
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  char tail = 0;
  const int n = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &year, &month, &day, &hour,
                            &minute, &second, &tail);
  const bool date_only = n == 3 && text.size() == 10;
  // Stored times are int64 nanoseconds: 1970 to 2262.
  if (!(date_only || n == 5 || n == 6) || year < 1970 || year > 2261 || month < 1 || month > 12 ||
      day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return InvalidArgument("parameter " + name + ": '" + EscapeForDisplay(text, 40) +
                           "' is not a date from 1970 to 2261 (YYYY-MM-DD or "
                           "YYYY-MM-DDTHH:MM, UTC)");
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<int64_t>(timegm(&tm)) * 1'000'000'000;
}

}  // namespace

ApiReply ErrorReply(const Status& status) {
  ApiReply reply;
  reply.status = HttpStatusOf(status.code());
  reply.body = {{"error", {{"code", CodeName(status.code())}, {"message", status.message()}}}};
  return reply;
}

// The handlers, one per route, and the state they share.
class UiApiRoutes {
 public:
  UiApiRoutes(store::Store* store, const UiApiOptions& options, ReplayJobs* replays)
      : store_(store), options_(options), replays_(replays) {}

  ApiReply Handle(const ApiRequest& request) {
    if (request.path.compare(0, kPrefix.size(), kPrefix) != 0) {
      return ErrorReply(NotFound("no API route " + EscapeForDisplay(request.path, 80)));
    }
    const std::vector<std::string> parts = SplitPath(request.path.substr(kPrefix.size()));
    bool path_matched = false;
    for (const Route& route : kRoutes) {
      if (!Matches(route.pattern, parts)) continue;
      path_matched = true;
      if (route.method != request.method) continue;
      Result<nlohmann::json> body = (this->*route.handler)(request, parts);
      if (!body.ok()) return ErrorReply(body.status());
      ApiReply reply;
      reply.status = route.method == std::string_view("POST") ? 202 : 200;
      reply.body = std::move(*body);
      return reply;
    }
    if (path_matched) {
      ApiReply r = ErrorReply(InvalidArgument("method " + request.method + " is not allowed on " +
                                              EscapeForDisplay(request.path, 80)));
      r.status = 405;
      return r;
    }
    return ErrorReply(NotFound("no API route " + EscapeForDisplay(request.path, 80)));
  }

 private:
  using Handler = Result<nlohmann::json> (UiApiRoutes::*)(const ApiRequest&,
                                                          const std::vector<std::string>&);
  struct Route {
    std::string_view method;
    std::vector<std::string_view> pattern;  // "*": any one segment
    Handler handler;
  };
  static const std::vector<Route> kRoutes;

  static bool Matches(const std::vector<std::string_view>& pattern,
                      const std::vector<std::string>& parts) {
    if (pattern.size() != parts.size()) return false;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (pattern[i] != "*" && pattern[i] != parts[i]) return false;
    }
    return true;
  }

  Result<nlohmann::json> StoreInfo(const ApiRequest&, const std::vector<std::string>&) {
    TRACE_ASSIGN_OR_RETURN(store::StoreStats stats, store_->Stats());
    return nlohmann::json{{"store", store_->path()}, {"schema_version", store_->schema_version()},
                          {"read_only", true},       {"redacted", options_.redaction.has_value()},
                          {"runs", stats.runs},      {"events", stats.events}};
  }

  Result<nlohmann::json> Runs(const ApiRequest& r, const std::vector<std::string>&) {
    store::RunQuery q;
    TRACE_ASSIGN_OR_RETURN(int64_t limit, IntParam(r, "limit", kDefaultRunPage, 1,
                                                   static_cast<int64_t>(store::kMaxRunPage)));
    q.limit = static_cast<size_t>(limit);
    q.cursor = Param(r, "cursor");
    q.label = Param(r, "label");
    q.text = Param(r, "q");
    q.model = Param(r, "model");
    q.parent_run_id = Param(r, "parent");
    const std::string order = Param(r, "order");
    if (order != "" && order != "newest" && order != "oldest") {
      return InvalidArgument("parameter order: '" + EscapeForDisplay(order, 40) +
                             "' is not newest or oldest");
    }
    q.oldest_first = order == "oldest";
    TRACE_ASSIGN_OR_RETURN(q.started_from_ns, TimeParam(r, "from"));
    TRACE_ASSIGN_OR_RETURN(q.started_before_ns, TimeParam(r, "before"));
    for (const std::string& word : SplitList(Param(r, "status"))) {
      std::optional<store::RunStatus> s = store::ParseRunStatus(word);
      if (!s) {
        return InvalidArgument("parameter status: '" + EscapeForDisplay(word, 40) +
                               "' is not complete, recording, incomplete or crashed");
      }
      q.status.push_back(*s);
    }
    const std::string content = AsciiLower(Param(r, "content"));
    store::RunPage page;
    if (content.empty()) {
      TRACE_ASSIGN_OR_RETURN(page, store_->QueryRuns(q));
    } else {
      TRACE_ASSIGN_OR_RETURN(page, ContentPage(q, content));
    }
    nlohmann::json runs = nlohmann::json::array();
    for (const store::RunSummary& s : page.runs) {
      nlohmann::json row = RunSummaryJson(s);
      TRACE_ASSIGN_OR_RETURN(row["verifications"], NewestVerdicts(s.run_id));
      runs.push_back(std::move(row));
    }
    return nlohmann::json{
        {"runs", std::move(runs)},
        {"next", page.next.empty() ? nlohmann::json() : nlohmann::json(page.next)},
        {"scan_limited", page.scan_limited}};
  }

  // Whether run `id`'s content, as shown, holds `content`. The stored text is searched
  // first: redaction only replaces text, so a run without a match there has none once
  // redacted (and the redactor, compiled per run, is built only for runs that match). A
  // search for a redaction marker's own text therefore finds nothing.
  bool Contains(const std::string& id, const std::string& content) {
    std::vector<exporters::BadRow> bad_rows;
    Result<exporters::RunData> raw = exporters::LoadRun(*store_, id, nullptr, &bad_rows);
    if (!raw.ok() || !EventsContain(raw->events, content)) return false;
    if (!options_.redaction) return true;
    Result<exporters::RunData> shown = Load(id, &bad_rows);
    return shown.ok() && EventsContain(shown->events, content);
  }

  // A page of the runs `q` selects whose content (as shown: redacted) holds `content`,
  // reading the events of at most kMaxContentScanRuns runs; a page that stops there is
  // short, scan_limited, and its `next` goes on after the last run read.
  Result<store::RunPage> ContentPage(store::RunQuery q, const std::string& content) {
    store::RunPage out;
    const size_t want = q.limit;
    int scanned = 0;
    while (true) {
      TRACE_ASSIGN_OR_RETURN(store::RunPage page, store_->QueryRuns(q));
      for (store::RunSummary& s : page.runs) {
        const std::string cursor = store::RunCursor(s);
        ++scanned;
        if (Contains(s.run_id, content)) {
          if (out.runs.size() == want) {  // one more matches: the page is full
            out.next = store::RunCursor(out.runs.back());
            return out;
          }
          out.runs.push_back(std::move(s));
        }
        if (scanned >= kMaxContentScanRuns) {
          out.scan_limited = true;
          out.next = cursor;
          return out;
        }
      }
      if (page.next.empty()) return out;
      q.cursor = page.next;
    }
  }

  Result<nlohmann::json> Run(const ApiRequest& r, const std::vector<std::string>& parts) {
    TRACE_ASSIGN_OR_RETURN(std::string id, store_->ResolveRunId(parts[1]));
    TRACE_ASSIGN_OR_RETURN(int64_t from_seq, IntParam(r, "from_seq", 1, 1, INT64_MAX));
    TRACE_ASSIGN_OR_RETURN(int64_t limit,
                           IntParam(r, "limit", kDefaultEventPage, 1, kMaxEventPage));
    std::vector<exporters::BadRow> bad_rows;
    TRACE_ASSIGN_OR_RETURN(exporters::RunData run, Load(id, &bad_rows));
    const int64_t start = run.header.start_time_ns();
    nlohmann::json events = nlohmann::json::array();
    uint64_t next_seq = 0;
    for (const proto::Event& e : run.events) {
      if (e.seq() < static_cast<uint64_t>(from_seq)) continue;
      if (static_cast<int64_t>(events.size()) == limit) {
        next_seq = e.seq();
        break;
      }
      events.push_back(TimelineJson(e, start));
    }
    nlohmann::json errors = nlohmann::json::array();
    for (const exporters::BadRow& b : bad_rows) {
      errors.push_back({{"seq", b.seq}, {"message", b.status.message()}});
    }
    nlohmann::json out = RunJson(id, run.summary, run.header);
    out["summary"] = RunSummaryJson(run.summary);
    out["model"] = {{"name", run.header.model().model_name()},
                    {"architecture", run.header.model().architecture()},
                    {"dtype", run.header.model().dtype()},
                    {"weights_sha256", run.header.model().weights_sha256()},
                    {"model_dir", run.header.model().model_dir()}};
    out["events"] = std::move(events);
    out["next_seq"] = next_seq ? nlohmann::json(next_seq) : nlohmann::json();
    out["errors"] = std::move(errors);
    out["redaction"] = exporters::RedactionJson(run);
    TRACE_ASSIGN_OR_RETURN(out["verifications"], AllVerdicts(id));
    // Lineage: the runs that re-ran or forked this one (a page of them).
    store::RunQuery children;
    children.parent_run_id = id;
    children.limit = 100;
    children.oldest_first = true;
    children.started_from_ns = start;  // a rerun starts after the run it re-runs
    TRACE_ASSIGN_OR_RETURN(store::RunPage page, store_->QueryRuns(children));
    out["children"] = nlohmann::json::array();
    for (const store::RunSummary& s : page.runs) out["children"].push_back(RunSummaryJson(s));
    return out;
  }

  Result<nlohmann::json> Event(const ApiRequest&, const std::vector<std::string>& parts) {
    TRACE_ASSIGN_OR_RETURN(std::string id, store_->ResolveRunId(parts[1]));
    uint64_t seq = 0;
    auto [end, ec] = std::from_chars(parts[3].data(), parts[3].data() + parts[3].size(), seq);
    if (ec != std::errc() || end != parts[3].data() + parts[3].size() || seq == 0) {
      return InvalidArgument("event '" + EscapeForDisplay(parts[3], 40) +
                             "' is not a sequence number (1, 2, ...)");
    }
    std::vector<exporters::BadRow> bad_rows;
    TRACE_ASSIGN_OR_RETURN(exporters::RunData run, Load(id, &bad_rows));
    for (const exporters::BadRow& b : bad_rows) {
      if (b.seq == seq) return b.status;
    }
    auto it = std::find_if(run.events.begin(), run.events.end(),
                           [seq](const proto::Event& e) { return e.seq() == seq; });
    if (it == run.events.end()) {
      return NotFound("run " + id + " has no event " + std::to_string(seq));
    }
    nlohmann::json out = TimelineJson(*it, run.header.start_time_ns());
    TRACE_ASSIGN_OR_RETURN(std::string whole, store::MessageToJson(*it));
    out["event"] = nlohmann::json::parse(whole);
    if (it->has_llm_call()) out["tokens"] = TokensJson(it->llm_call(), run.header);
    return out;
  }

  Result<nlohmann::json> Diff(const ApiRequest& r, const std::vector<std::string>&) {
    const std::string a = Param(r, "a"), b = Param(r, "b");
    if (a.empty() || b.empty()) return InvalidArgument("a diff needs two runs: ?a=RUN&b=RUN");
    TRACE_ASSIGN_OR_RETURN(std::string id_a, store_->ResolveRunId(a));
    TRACE_ASSIGN_OR_RETURN(std::string id_b, store_->ResolveRunId(b));
    TRACE_ASSIGN_OR_RETURN(exporters::RunData run_a, Load(id_a, nullptr));
    TRACE_ASSIGN_OR_RETURN(exporters::RunData run_b, Load(id_b, nullptr));
    replayer::DiffOptions options;
    TRACE_ASSIGN_OR_RETURN(int64_t call, IntParam(r, "call", 0, 0, INT32_MAX));
    options.call = static_cast<int>(call);
    TRACE_ASSIGN_OR_RETURN(
        replayer::RunDiff diff,
        replayer::DiffLoadedRuns(run_a.header, run_a.events, run_b.header, run_b.events,
                                 TokenizerFor(run_a.header), options));
    nlohmann::json out = replayer::DiffJson(diff);
    out["run_a"] = id_a;
    out["run_b"] = id_b;
    return out;
  }

  Result<nlohmann::json> StartReplay(const ApiRequest& r, const std::vector<std::string>&) {
    const std::string run = Param(r, "run");
    if (run.empty()) return InvalidArgument("a replay needs a run: ?run=RUN");
    TRACE_ASSIGN_OR_RETURN(std::string id, store_->ResolveRunId(run));
    std::vector<int> calls;
    if (std::string list = Param(r, "calls"); !list.empty()) {
      TRACE_ASSIGN_OR_RETURN(calls, replayer::ParseCallList(list));
    }
    TRACE_ASSIGN_OR_RETURN(std::string job, replays_->Start(id, std::move(calls)));
    return nlohmann::json{{"replay", job}, {"run_id", id}};
  }

  Result<nlohmann::json> ReplayStatus(const ApiRequest&, const std::vector<std::string>& parts) {
    std::optional<ReplayJobState> job = replays_->Get(parts[1]);
    if (!job) return NotFound("no replay " + EscapeForDisplay(parts[1], 40));
    return ReplayStateJson(*job);
  }

  static std::vector<std::string> SplitList(const std::string& text) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < text.size()) {
      size_t j = text.find(',', i);
      if (j == std::string::npos) j = text.size();
      if (j > i) out.push_back(text.substr(i, j - i));
      i = j + 1;
    }
    return out;
  }

  Result<exporters::RunData> Load(const std::string& id, std::vector<exporters::BadRow>* bad_rows) {
    return exporters::LoadRun(*store_, id, options_.redaction ? &*options_.redaction : nullptr,
                              bad_rows);
  }

  // One event on the run page's timeline: `trace show --json`'s fields, plus what the
  // waterfall draws (a model call's timings, an output line's text).
  static nlohmann::json TimelineJson(const proto::Event& e, int64_t start_ns) {
    nlohmann::json j = EventSummaryJson(e, start_ns);
    if (e.has_llm_call()) {
      const proto::Timings& t = e.llm_call().timings();
      j["timings"] = {{"queue_ms", t.queue_ms()},
                      {"prefill_ms", t.prefill_ms()},
                      {"decode_ms", t.decode_ms()},
                      {"total_ms", t.total_ms()},
                      {"start_offset_ms", t.start_ns() ? (t.start_ns() - start_ns) / 1e6 : 0.0}};
      j["model"] = e.llm_call().model();
      j["error"] = e.llm_call().error();
      j["request_json"] = e.llm_call().request_json();
      j["response_json"] = e.llm_call().response_json();
      j["stream"] = e.llm_call().stream();
      j["prompt_tokens_reused"] = e.llm_call().prompt_tokens_reused();
    } else if (e.has_output()) {
      j["text"] = e.output().data();
    } else if (e.has_tool_result()) {
      j["duration_ms"] = e.tool_result().duration_ms();
    }
    return j;
  }

  // The sampled tokens with their margins (chosen logit minus the runner-up's) and, where
  // the run's tokenizer can be read, their text.
  nlohmann::json TokensJson(const proto::LlmCall& c, const proto::RunHeader& header) {
    const engine::Tokenizer* tok = TokenizerFor(header);
    nlohmann::json tokens = nlohmann::json::array();
    for (int i = 0; i < c.token_ids_size(); ++i) {
      nlohmann::json t = {{"step", i}, {"id", c.token_ids(i)}};
      if (tok != nullptr) t["text"] = tok->TokenText(c.token_ids(i));
      if (i < c.logits_size()) t["logit"] = c.logits(i);
      if (i < c.logprobs_size()) t["logprob"] = c.logprobs(i);
      if (i < c.runner_up_ids_size() && i < c.runner_up_logits_size() && i < c.logits_size()) {
        t["runner_up_id"] = c.runner_up_ids(i);
        if (tok != nullptr) t["runner_up_text"] = tok->TokenText(c.runner_up_ids(i));
        t["runner_up_logit"] = c.runner_up_logits(i);
        t["margin"] = c.logits(i) - c.runner_up_logits(i);
      }
      tokens.push_back(std::move(t));
    }
    return {{"tokens", std::move(tokens)},
            {"text_from", tok != nullptr ? header.model().model_dir() : std::string()}};
  }

  // The run's tokenizer: its model folder's tokenizer.json when that still hashes as
  // recorded (else null: the page shows token ids only). Loaded once per folder.
  const engine::Tokenizer* TokenizerFor(const proto::RunHeader& header) {
    const std::string dir = header.model().model_dir();
    const std::string sha = header.model().tokenizer_sha256();
    if (dir.empty() || sha.empty()) return nullptr;
    std::lock_guard<std::mutex> lock(tokenizers_mu_);
    auto it = tokenizers_.find(dir + "\n" + sha);
    if (it != tokenizers_.end()) return it->second.get();
    std::unique_ptr<engine::Tokenizer> tok;
    if (Result<std::string> file_sha = engine::ModelTokenizerSha256(dir);
        file_sha.ok() && *file_sha == sha) {
      if (auto loaded = engine::LoadModelTokenizer(dir); loaded.ok()) tok = std::move(*loaded);
    }
    const engine::Tokenizer* raw = tok.get();
    tokenizers_[dir + "\n" + sha] = std::move(tok);
    return raw;
  }

  // The newest verdict per machine kind, as `trace ls` shows them.
  Result<nlohmann::json> NewestVerdicts(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(std::vector<store::Verification> rows, Verdicts(run_id));
    nlohmann::json out = nlohmann::json::array();
    for (const store::Verification& v : NewestPerMachine(rows)) out.push_back(VerificationJson(v));
    return out;
  }
  Result<nlohmann::json> AllVerdicts(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(std::vector<store::Verification> rows, Verdicts(run_id));
    nlohmann::json out = nlohmann::json::array();
    for (const store::Verification& v : rows) out.push_back(VerificationJson(v));
    return out;
  }
  Result<std::vector<store::Verification>> Verdicts(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queue_ == nullptr) {
      TRACE_ASSIGN_OR_RETURN(queue_, store_->OpenVerifyQueue());
    }
    return queue_->RunVerifications(run_id);
  }

  store::Store* store_;
  const UiApiOptions& options_;
  ReplayJobs* replays_;
  std::mutex tokenizers_mu_;
  std::map<std::string, std::unique_ptr<engine::Tokenizer>> tokenizers_;
  std::mutex queue_mu_;
  std::unique_ptr<store::VerifyQueue> queue_;
};

const std::vector<UiApiRoutes::Route> UiApiRoutes::kRoutes = {
    {"GET", {"store"}, &UiApiRoutes::StoreInfo},
    {"GET", {"runs"}, &UiApiRoutes::Runs},
    {"GET", {"runs", "*"}, &UiApiRoutes::Run},
    {"GET", {"runs", "*", "events", "*"}, &UiApiRoutes::Event},
    {"GET", {"diff"}, &UiApiRoutes::Diff},
    {"POST", {"replays"}, &UiApiRoutes::StartReplay},
    {"GET", {"replays", "*"}, &UiApiRoutes::ReplayStatus},
};

UiApi::UiApi(store::Store* store, UiApiOptions options)
    : store_(store),
      options_(std::move(options)),
      replays_(std::make_unique<ReplayJobs>(store, options_.replay, options_.max_replays)),
      routes_(std::make_unique<UiApiRoutes>(store_, options_, replays_.get())) {}

UiApi::~UiApi() = default;

ApiReply UiApi::Handle(const ApiRequest& request) {
  return routes_->Handle(request);
}

}  // namespace trace::ui
