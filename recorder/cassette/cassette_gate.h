// The CallGate of `trace rerun` (recorder/server/call_gate.h): answers the agent from a
// Cassette while it asks what the recording holds, and reports and lets through to the live
// model (or refuses, --strict) from the first request that differs.
//
// Modes. Cassette (default): every model call is matched (call_matcher.h); a match is
// answered from the recording in the shape asked (recorded_answer.h; an embeddings call
// with its recorded status and body) and recorded in the new run as a call with
// cassette_seq set; the first call that matches nothing is the divergence, and it and every
// later call run live. Fork (live_from K): calls before K as
// in cassette mode, K and later live (call K's body replaced with --edit-call's). Clock
// reads return the recorded reads in order until the re-run goes live (or they run out);
// tool lookups (POST /trace/v1/tool) return the recorded result for the same call id (the
// model's, which the recorded answers gave back), else of the same tool name and arguments
// in recorded order, until the re-run goes live; with tools_recorded_only they
// always do, and a tool call without a recording is refused (409).
//
// Ownership: borrows the Cassette (must outlive the gate) and the frontend it is attached
// to (HttpFrontend::SetCallGate), which must outlive its handlers.
// Thread safety: every method may be called concurrently (handler threads). Errors: a
// recording the store does not take is answered 503 like any call that is not recorded;
// --strict answers the first differing call 409 (code rerun_diverged) and calls on_stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "recorder/cassette/call_matcher.h"
#include "recorder/cassette/cassette.h"
#include "recorder/cassette/divergence.h"
#include "recorder/server/call_gate.h"
#include "recorder/server/frontend.h"

namespace trace::recorder {

struct CassetteGateOptions {
  int live_from = 0;  // fork: the first model call served live (1-based); 0: not a fork
  bool strict = false;
  bool tools_recorded_only = false;
  int edit_call = 0;      // this live call is served with edit_body instead (0: none)
  std::string edit_body;  // a request body in the API the agent uses for that call
  // --strict: called once, from a handler thread, at the first difference.
  std::function<void()> on_stop;
};

struct CassetteStats {
  int64_t calls = 0;            // model calls the agent made
  int64_t calls_answered = 0;   // answered from the recording
  int64_t calls_live = 0;       // let through to the live model
  int64_t tools_answered = 0;   // tool lookups answered from the recording
  int64_t tools_live = 0;       // tool lookups the agent ran live
  int64_t clocks_answered = 0;  // clock reads answered from the recording
  int64_t recorded_calls = 0;   // model calls in the recording
  int64_t unused_calls = 0;     // recorded calls no request used
};

class CassetteGate : public CallGate {
 public:
  CassetteGate(const Cassette& cassette, CassetteGateOptions options);

  void Attach(HttpFrontend* frontend) override { frontend_ = frontend; }
  Decision AdmitModelCall(const WireFormat& format, const httplib::Request& req,
                          httplib::Response& res) override;
  Decision AdmitEmbeddingsCall(const httplib::Request& req, httplib::Response& res) override;
  std::optional<proto::ClockRead> RecordedClock(const std::string& clock) override;
  std::variant<ToolAnswer, ApiError> LookupTool(const std::string& name,
                                                const nlohmann::json& arguments,
                                                const std::string& call_id) override;

  // The first divergence (also an agent that ended before using every recorded call, once
  // Finish was called); none: the re-run followed the recording.
  std::optional<Divergence> divergence() const;
  // After the agent ended: notes recorded calls left unused as a divergence.
  void Finish();
  CassetteStats stats() const;
  bool live() const { return live_; }

 private:
  // Records the first divergence (and a "rerun_divergence" note in the run); true when
  // this one was the first.
  bool NoteDivergence(Divergence d);
  // Answers `req` from `recorded` and records it; false when the store did not take it
  // (then `res` holds the 503).
  void AnswerFromRecording(const RecordedCall& recorded, const WireFormat& format,
                           const CompletionRequest& request, const httplib::Request& req,
                           httplib::Response& res);
  // The decision for a call of `identity`, whatever its API: `answer` answers it from the
  // recorded call it matched; `format` shapes --strict's refusal (null: OpenAI's shape).
  Decision Admit(const RequestIdentity& identity, const WireFormat* format, httplib::Response& res,
                 const std::function<void(const RecordedCall&)>& answer);
  // An embeddings call: the recorded status and body, recorded in the new run.
  void AnswerEmbeddingsFromRecording(const RecordedCall& recorded, const httplib::Request& req,
                                     httplib::Response& res);
  void RefuseStrict(const WireFormat* format, const Divergence& d, httplib::Response& res);

  const Cassette& cassette_;
  HttpFrontend* frontend_ = nullptr;
  CassetteGateOptions options_;
  CallMatcher matcher_;
  std::atomic<int> calls_{0};
  std::atomic<bool> live_{false};
  std::atomic<int64_t> answered_{0}, live_calls_{0}, tools_answered_{0}, tools_live_{0},
      clocks_answered_{0};
  mutable std::mutex mu_;  // guards: divergence_, stopped_, tool_used_, clock_cursor_
  std::optional<Divergence> divergence_;
  bool stopped_ = false;
  std::vector<bool> tool_used_;
  std::map<std::string, size_t> clock_cursor_;  // clock name -> next index into clocks()
};

}  // namespace trace::recorder
