// A cassette: what `trace rerun` answers an agent with, loaded from one recorded run: its
// model calls (with each request's identity, request_identity.h), the clock reads the agent
// made, and the tool results it reported (with the arguments of the tool call each answered,
// from the model's or the agent's ToolCall event with the same call id).
//
// Ownership: a Cassette owns copies of the recorded events it needs; it does not keep the
// store. Thread safety: immutable after Load, so it may be shared by any number of threads.
// Errors: an unknown run id (NotFound naming it and the store), a run without model calls
// (FailedPrecondition), a corrupt event or a recorded request that no longer parses
// (naming the seq).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "recorder/cassette/request_identity.h"
#include "store/store.h"

namespace trace::recorder {

struct RecordedCall {
  int number = 0;    // 1-based position among the run's model calls
  uint64_t seq = 0;  // the LlmCall's seq in the run
  proto::LlmCall call;
  RequestIdentity identity;
};

struct RecordedClock {
  uint64_t seq = 0;
  proto::ClockRead read;
};

struct RecordedTool {
  uint64_t seq = 0;  // the ToolResult's seq
  std::string name;
  std::string arguments_key;  // the tool call's arguments, canonical JSON ("{}" if unknown)
  proto::ToolResult result;
};

// The canonical text of tool arguments, what recorded and live lookups compare.
std::string ToolArgumentsKey(const nlohmann::json& arguments);

class Cassette {
 public:
  // Loads `run_id` (a full id) from `store`.
  static Result<Cassette> Load(store::Store& store, const std::string& run_id);
  // The same from a run already read (header.run_id names it).
  static Result<Cassette> FromEvents(const proto::RunHeader& header,
                                     const std::vector<proto::Event>& events);

  const std::string& run_id() const { return run_id_; }
  const proto::RunHeader& header() const { return header_; }
  const std::vector<RecordedCall>& calls() const { return calls_; }
  const std::vector<RecordedClock>& clocks() const { return clocks_; }
  const std::vector<RecordedTool>& tools() const { return tools_; }
  // The run was recorded through --upstream (its calls carry no token ids).
  bool recorded_upstream() const;
  // The model name the agent asked for in its first call.
  std::string model_name() const;
  // How the recorded run ended; null when it has no RunEnd.
  const proto::RunEnd* end() const { return has_end_ ? &end_ : nullptr; }

 private:
  std::string run_id_;
  proto::RunHeader header_;
  std::vector<RecordedCall> calls_;
  std::vector<RecordedClock> clocks_;
  std::vector<RecordedTool> tools_;
  proto::RunEnd end_;
  bool has_end_ = false;
};

}  // namespace trace::recorder
