#include "recorder/cassette/cassette_gate.h"

#include <variant>

#include "recorder/api/anthropic_messages.h"
#include "recorder/cassette/recorded_answer.h"
#include "recorder/server/call_recording.h"
#include "recorder/server/http_util.h"

namespace trace::recorder {

namespace {

// A call the recording answered took this re-run's time, not the recorded call's.
void StampAnsweredNow(proto::Timings* t, int64_t start_ns) {
  t->Clear();
  t->set_start_ns(start_ns);
  t->set_end_ns(WallClockNs());
  t->set_total_ms(static_cast<double>(t->end_ns() - start_ns) / 1e6);
}

}  // namespace

CassetteGate::CassetteGate(const Cassette& cassette, CassetteGateOptions options)
    : cassette_(cassette),
      options_(std::move(options)),
      matcher_(cassette),
      tool_used_(cassette.tools().size(), false) {}

bool CassetteGate::NoteDivergence(Divergence d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (divergence_) return false;
    divergence_ = d;
  }
  if (RunLog* log = frontend_ != nullptr ? frontend_->log() : nullptr) {
    proto::Note note;
    note.set_topic("rerun_divergence");
    note.set_text(d.Summary());
    note.set_data_json(d.Json().dump());
    (void)log->RecordNote(std::move(note));
  }
  return true;
}

void CassetteGate::RefuseStrict(const WireFormat* format, const Divergence& d,
                                httplib::Response& res) {
  ApiError e;
  e.http_status = 409;
  e.type = "invalid_request_error";
  e.code = "rerun_diverged";
  e.message = "trace rerun --strict: " + d.Summary();
  res.status = e.http_status;
  res.set_content(format != nullptr ? format->ErrorBody(e) : e.Body(), "application/json");
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = !stopped_;
    stopped_ = true;
  }
  if (first && options_.on_stop) options_.on_stop();
}

CallGate::Decision CassetteGate::AdmitModelCall(const WireFormat& format,
                                                const httplib::Request& req,
                                                httplib::Response& res) {
  auto parsed = format.Parse(req.body);
  // A request that does not parse is the live backend's to refuse (with its 400).
  if (std::holds_alternative<ApiError>(parsed)) return Decision{};
  const CompletionRequest& request = std::get<CompletionRequest>(parsed);
  return Admit(IdentityOf(request), &format, res, [&](const RecordedCall& recorded) {
    AnswerFromRecording(recorded, format, request, req, res);
  });
}

CallGate::Decision CassetteGate::AdmitEmbeddingsCall(const httplib::Request& req,
                                                     httplib::Response& res) {
  std::optional<RequestIdentity> identity = EmbeddingsIdentityOf(req.body);
  // Not a JSON object: the live backend's to refuse.
  if (!identity) return Decision{};
  return Admit(*identity, nullptr, res, [&](const RecordedCall& recorded) {
    AnswerEmbeddingsFromRecording(recorded, req, res);
  });
}

CallGate::Decision CassetteGate::Admit(const RequestIdentity& identity, const WireFormat* format,
                                       httplib::Response& res,
                                       const std::function<void(const RecordedCall&)>& answer) {
  Decision decision;
  const int number = ++calls_;
  decision.run_position = number - 1;
  if (options_.live_from > 0 && number >= options_.live_from) {
    matcher_.Skip();
    live_ = true;
    ++live_calls_;
    if (number == options_.edit_call) decision.live_body = options_.edit_body;
    return decision;
  }
  if (live_ && !options_.strict) {
    ++live_calls_;
    return decision;
  }
  MatchResult m = matcher_.Match(identity);
  if (m.kind == MatchResult::kMatched) {
    ++answered_;
    answer(*m.recorded);
    decision.answered = true;
    return decision;
  }
  Divergence d;
  if (m.kind == MatchResult::kExhausted) {
    d.kind = Divergence::kExtraCall;
    d.call = number;
  } else {
    d = RequestDivergence(number, m.expected->number, m.expected->seq, m.expected->identity,
                          identity);
  }
  NoteDivergence(d);
  if (options_.strict) {
    RefuseStrict(format, d, res);
    decision.answered = true;
    return decision;
  }
  live_ = true;
  ++live_calls_;
  return decision;
}

void CassetteGate::AnswerFromRecording(const RecordedCall& recorded, const WireFormat& format,
                                       const CompletionRequest& request,
                                       const httplib::Request& req, httplib::Response& res) {
  const int64_t start_ns = WallClockNs();
  RecordedReply reply = RenderRecordedAnswer(recorded, format, request);
  Result<uint64_t> last = uint64_t{0};
  if (RunLog* log = frontend_->log()) {
    RecordToolResultsFromMessages(log, request);
    proto::LlmCall c = recorded.call;
    c.set_api(std::string(format.api()));
    c.set_endpoint(req.path);
    c.set_request_json(req.body);
    c.set_stream(request.stream);
    c.set_response_json(reply.response_json);
    if (reply.stream) {
      c.set_response_stream(reply.body);
    } else {
      c.clear_response_stream();
    }
    c.set_http_status(reply.status);
    c.set_cassette_seq(recorded.seq);
    c.set_model(request.model);
    StampAnsweredNow(c.mutable_timings(), start_ns);
    last = log->RecordLlmCall(std::move(c));
    if (last.ok() && *last != 0 && !reply.tool_calls.empty()) {
      last = RecordModelToolCalls(log, *last, reply.tool_calls);
    }
  }
  // Acknowledged means stored, as for a live call.
  if (Status st = frontend_->Commit(last); !st.ok()) {
    ApiError e = ErrorFromStatus(st);
    res.status = e.http_status;
    res.set_content(format.ErrorBody(e), "application/json");
    return;
  }
  res.status = reply.status;
  if (reply.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(reply.body, "text/event-stream");
  } else {
    res.set_content(reply.body, "application/json");
  }
}

void CassetteGate::AnswerEmbeddingsFromRecording(const RecordedCall& recorded,
                                                 const httplib::Request& req,
                                                 httplib::Response& res) {
  const int64_t start_ns = WallClockNs();
  const proto::LlmCall& rc = recorded.call;
  Result<uint64_t> last = uint64_t{0};
  if (RunLog* log = frontend_->log()) {
    proto::LlmCall c = rc;
    c.set_endpoint(req.path);
    c.set_request_json(req.body);
    c.set_cassette_seq(recorded.seq);
    StampAnsweredNow(c.mutable_timings(), start_ns);
    last = log->RecordLlmCall(std::move(c));
  }
  // Acknowledged means stored, as for a live call.
  if (Status st = frontend_->Commit(last); !st.ok()) return SendError(res, ErrorFromStatus(st));
  // The recorded bytes as the agent got them (the identity includes encoding_format, so they
  // are in the encoding asked for).
  res.status = rc.http_status() != 0 ? rc.http_status() : 200;
  res.set_content(rc.response_json(), "application/json");
}

std::optional<proto::ClockRead> CassetteGate::RecordedClock(const std::string& clock) {
  if (live_) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  size_t& cursor = clock_cursor_[clock];
  const auto& clocks = cassette_.clocks();
  while (cursor < clocks.size() && clocks[cursor].read.clock() != clock) ++cursor;
  if (cursor >= clocks.size()) return std::nullopt;
  proto::ClockRead read = clocks[cursor].read;
  read.set_cassette_seq(clocks[cursor].seq);
  ++cursor;
  ++clocks_answered_;
  return read;
}

std::variant<CallGate::ToolAnswer, ApiError> CassetteGate::LookupTool(
    const std::string& name, const nlohmann::json& arguments, const std::string& call_id) {
  ToolAnswer answer;
  if (live_ && !options_.tools_recorded_only) {
    ++tools_live_;
    return answer;
  }
  const std::string key = ToolArgumentsKey(arguments);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& tools = cassette_.tools();
    // By call id first: it names the call whatever its arguments (ones that were not valid
    // JSON, which an agent reads as it likes, included).
    auto matches = [&](size_t i, bool by_id) {
      if (tool_used_[i] || tools[i].name != name) return false;
      return by_id ? tools[i].result.call_id() == call_id : tools[i].arguments_key == key;
    };
    for (bool by_id : {true, false}) {
      if (by_id && call_id.empty()) continue;
      for (size_t i = 0; i < tools.size(); ++i) {
        if (!matches(i, by_id)) continue;
        tool_used_[i] = true;
        answer.recorded = true;
        answer.result = tools[i].result;
        answer.seq = tools[i].seq;
        ++tools_answered_;
        return answer;
      }
    }
  }
  Divergence d;
  d.kind = Divergence::kTool;
  d.call = calls_;
  d.tool_name = name;
  d.tool_arguments = key;
  if (options_.tools_recorded_only || options_.strict) {
    NoteDivergence(d);
    ApiError e;
    e.http_status = 409;
    e.code = "tool_not_recorded";
    e.message = d.Summary() + (options_.tools_recorded_only ? " (--tools recorded-only)"
                                                            : " (trace rerun --strict)");
    if (options_.strict) {
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        first = !stopped_;
        stopped_ = true;
      }
      if (first && options_.on_stop) options_.on_stop();
    }
    return e;
  }
  NoteDivergence(d);
  ++tools_live_;
  return answer;
}

void CassetteGate::Finish() {
  if (options_.live_from > 0) return;  // a fork leaves the rest of the recording by design
  std::vector<const RecordedCall*> unused = matcher_.Unused();
  if (unused.empty()) return;
  Divergence d;
  d.kind = Divergence::kFewerCalls;
  d.expected_call = unused.front()->number;
  d.expected_seq = unused.front()->seq;
  NoteDivergence(d);
}

std::optional<Divergence> CassetteGate::divergence() const {
  std::lock_guard<std::mutex> lock(mu_);
  return divergence_;
}

CassetteStats CassetteGate::stats() const {
  CassetteStats s;
  s.calls = calls_;
  s.calls_answered = answered_;
  s.calls_live = live_calls_;
  s.tools_answered = tools_answered_;
  s.tools_live = tools_live_;
  s.clocks_answered = clocks_answered_;
  s.recorded_calls = static_cast<int64_t>(matcher_.total());
  s.unused_calls = static_cast<int64_t>(matcher_.Unused().size());
  return s;
}

}  // namespace trace::recorder
