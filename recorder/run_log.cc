#include "recorder/run_log.h"

#include <cstdio>

#include "base/splitmix64.h"

namespace trace::recorder {

uint64_t DeriveCallSeed(uint64_t run_seed, uint64_t call_index) {
  return SplitMix64::Mix(run_seed + SplitMix64::kGamma * (call_index + 1));
}

RunLog::RunLog(std::unique_ptr<store::RunWriter> writer, uint64_t run_seed)
    : writer_(std::move(writer)), run_seed_(run_seed) {}

Result<uint64_t> RunLog::Append(proto::Event event) {
  return writer_->Append(std::move(event));
}

namespace {

Status NotRecorded(const Status& st) {
  return Unavailable("not recorded, so not answered: " + st.message());
}

}  // namespace

std::string DescribeWriterHealth(const store::WriterHealth& h) {
  switch (h.state) {
    case store::WriterHealth::State::kWaitingForLock: {
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.1f", static_cast<double>(h.waited_ms) / 1000.0);
      return "store busy: " + h.status.message() + "; waited " + waited + " s so far, " +
             std::to_string(h.pending_events) +
             " events held in memory; answers wait until they are stored";
    }
    case store::WriterHealth::State::kOk:
      return "store writable again: recording goes on (" + std::to_string(h.durable_seq) +
             " events stored)";
    case store::WriterHealth::State::kFailed:
      return "RECORDING STOPPED: " + h.status.message() +
             ". The agent's requests are answered with HTTP 503 from now on.";
  }
  return "";
}

Status RunLog::Commit(uint64_t seq) {
  if (seq == 0) return Status::Ok();
  Status st = writer_->WaitDurable(seq);
  return st.ok() ? st : NotRecorded(st);
}

Status RunLog::Commit(const Result<uint64_t>& seq) {
  return seq.ok() ? Commit(*seq) : NotRecorded(seq.status());
}

Status RunLog::Writable() const {
  store::WriterHealth h = writer_->health();
  if (h.state == store::WriterHealth::State::kFailed) return NotRecorded(h.status);
  return Status::Ok();
}

Result<uint64_t> RunLog::RecordLlmCall(proto::LlmCall call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.llm_calls;
    counts_.sampled_tokens += call.token_ids_size();
  }
  proto::Event e;
  *e.mutable_llm_call() = std::move(call);
  return Append(std::move(e));
}

Result<uint64_t> RunLog::RecordToolCall(proto::ToolCall call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!call.call_id().empty() && !tool_calls_seen_.insert(call.call_id()).second) {
      return uint64_t{0};
    }
    ++counts_.tool_calls;
  }
  proto::Event e;
  *e.mutable_tool_call() = std::move(call);
  return Append(std::move(e));
}

Result<uint64_t> RunLog::RecordToolResult(proto::ToolResult result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!result.call_id().empty() && !tool_results_seen_.insert(result.call_id()).second) {
      return uint64_t{0};
    }
    ++counts_.tool_results;
  }
  proto::Event e;
  *e.mutable_tool_result() = std::move(result);
  return Append(std::move(e));
}

Result<uint64_t> RunLog::RecordContext(proto::ContextChunk chunk) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.context_chunks;
  }
  proto::Event e;
  *e.mutable_context_chunk() = std::move(chunk);
  return Append(std::move(e));
}

Result<uint64_t> RunLog::RecordTemplateVar(proto::TemplateVar var) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.template_vars;
  }
  proto::Event e;
  *e.mutable_template_var() = std::move(var);
  return Append(std::move(e));
}

Result<uint64_t> RunLog::RecordClock(proto::ClockRead clock) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.clock_reads;
  }
  proto::Event e;
  *e.mutable_clock_read() = std::move(clock);
  return Append(std::move(e));
}

Result<uint64_t> RunLog::RecordNote(proto::Note note) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.notes;
    if (note.topic() == "rejected_request") ++counts_.rejected_requests;
  }
  proto::Event e;
  *e.mutable_note() = std::move(note);
  return Append(std::move(e));
}

Result<uint64_t> RunLog::RecordOutput(int stream, std::string_view data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.output_chunks;
  }
  proto::Event e;
  e.mutable_output()->set_stream(stream == 2 ? proto::Output::STDERR : proto::Output::STDOUT);
  e.mutable_output()->set_data(std::string(data));
  return Append(std::move(e));
}

RunCounts RunLog::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace trace::recorder
