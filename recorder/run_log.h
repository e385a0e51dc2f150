// RunLog: how the recorder writes a run through the store. It builds proto events from
// what the server saw, records every tool result and agent tool call once (by
// tool_call_id, whether it arrived in a `role: tool` message or through the event API),
// derives per-call seeds from the run seed, and keeps the counts for the summary.
//
// Ownership: a RunLog owns its store::RunWriter. Thread safety: every method may be
// called from several HTTP handler threads at once. Errors: a failing append or commit
// returns the store's Status (naming the run id); the server answers 503 with it and keeps
// serving (docs/recorder.md, "Durability").
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "store/store.h"

namespace trace::recorder {

struct RunCounts {
  int64_t llm_calls = 0;
  int64_t sampled_tokens = 0;
  int64_t tool_calls = 0;
  int64_t tool_results = 0;
  int64_t context_chunks = 0;
  int64_t template_vars = 0;
  int64_t clock_reads = 0;
  int64_t notes = 0;
  int64_t output_chunks = 0;
  int64_t rejected_requests = 0;
};

// One terminal line for a change of the writer's health: another process holds the
// store's lock (waiting, nothing lost), the lock is free again, or the store stopped
// taking writes (requests are answered 503 from now on).
std::string DescribeWriterHealth(const store::WriterHealth& health);

// The seed of a call whose request had none: SplitMix64::Mix(run seed + kGamma * (call
// index + 1)) (base/splitmix64.h; docs/recorder.md, "Seeds"). Part of the trace format: a
// replay and a re-run derive the same seeds from a recorded run seed, so this never changes.
uint64_t DeriveCallSeed(uint64_t run_seed, uint64_t call_index);

class RunLog {
 public:
  RunLog(std::unique_ptr<store::RunWriter> writer, uint64_t run_seed);

  const std::string& run_id() const { return writer_->run_id(); }
  uint64_t run_seed() const { return run_seed_; }
  store::RunWriter& writer() { return *writer_; }

  // Appends with the wall time stamped by the writer; returns the seq.
  Result<uint64_t> Append(proto::Event event);

  // Acknowledged means stored: a handler calls Commit with the last seq it recorded
  // before it answers. Returns once that event and every earlier one are committed (one
  // transaction for whatever the handlers appended meanwhile: group commit; it waits while
  // another process holds the store's lock). Unavailable when the store cannot take
  // writes: the handler answers 503 with this message instead. seq 0 (nothing recorded)
  // is Ok at once; an error from the append is passed through as Unavailable.
  Status Commit(uint64_t seq);
  Status Commit(const Result<uint64_t>& seq);
  // Ok while the store takes writes; else the reason (Unavailable), so a request can be
  // refused with 503 before any work is done.
  Status Writable() const;

  Result<uint64_t> RecordLlmCall(proto::LlmCall call);
  // Returns 0 when `call_id` was recorded before (a duplicate is skipped).
  Result<uint64_t> RecordToolCall(proto::ToolCall call);
  Result<uint64_t> RecordToolResult(proto::ToolResult result);
  Result<uint64_t> RecordContext(proto::ContextChunk chunk);
  Result<uint64_t> RecordTemplateVar(proto::TemplateVar var);
  Result<uint64_t> RecordClock(proto::ClockRead clock);
  Result<uint64_t> RecordNote(proto::Note note);
  Result<uint64_t> RecordOutput(int stream, std::string_view data);

  RunCounts counts() const;

 private:
  std::unique_ptr<store::RunWriter> writer_;
  uint64_t run_seed_;
  mutable std::mutex mu_;  // guards: tool_results_seen_, tool_calls_seen_, counts_
  std::set<std::string> tool_results_seen_;
  std::set<std::string> tool_calls_seen_;
  RunCounts counts_;
};

}  // namespace trace::recorder
