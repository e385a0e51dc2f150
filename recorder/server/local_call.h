// One model call served by the local engine, from arrival to recording, and the queue
// through which a streamed call's text reaches its HTTP writer.
//
// Ownership: shared (std::shared_ptr) between the HTTP handler and the callbacks it gives
// the scheduler. Thread safety: the request fields are written before Submit and only read
// after; the "scheduler-thread state" is written by the scheduler's callbacks and read by
// the handler only after the generation has finished; StreamQueue is guarded by its mutex.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "recorder/openai_api.h"
#include "recorder/scheduler.h"
#include "recorder/server/http_util.h"

namespace trace::recorder {

// Streamed text waiting for the HTTP writer.
struct StreamQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> deltas;
  bool finished = false;
};

struct Call {
  CompletionRequest req;
  std::string body;  // as received
  std::string endpoint;
  std::string rendered_prompt;
  std::vector<int32_t> prompt_ids;
  uint64_t seed = 0;
  int64_t call_index = 0;
  std::string constraint_json;
  std::string request_id;
  int64_t created = 0;
  int64_t start_ns = 0;
  SteadyClock::time_point start;
  bool tools_active = false;  // tool calls may appear: stream content only at the end
  size_t max_stop_len = 0;
  // Scheduler-thread state (read by the handler only after the generation finished).
  std::unique_ptr<engine::IncrementalDecoder> decoder;
  std::string text;
  bool stop_hit = false;
  size_t emitted = 0;  // bytes of `text` already streamed
  std::shared_ptr<StreamQueue> stream;
  std::shared_ptr<Generation> gen;
};

}  // namespace trace::recorder
