// JSON views of stored runs: the lossless export (`trace export --format json`) and the
// compact per-event summaries behind `trace show`.
//
// Ownership: functions take caller-owned messages and return new strings. Thread safety:
// reentrant. Errors: the export fails on the first row that does not decode, naming the
// run id and seq; nothing throws.
#pragma once

#include <ostream>
#include <string>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "store/store.h"

namespace trace::store {

// Protobuf's canonical JSON mapping (proto field names, every field including defaults;
// 64-bit integers and digests as decimal strings, floats in round-trip form, NaN and
// infinities as strings, bytes as base64): parses back to the identical message.
Result<std::string> MessageToJson(const google::protobuf::Message& message);

// Writes {"format":"trace-run","format_version":N,"summary":{...},"header":{...},
// "events":[...]} to `out`. Every event in full, prompt and sampled token ids, digests,
// logits and blobs resolved.
Status ExportRunJson(Store& store, const std::string& run_id, std::ostream& out);

// Parses one exported event / header back (used to prove the export lossless).
Status JsonToMessage(const std::string& json, google::protobuf::Message* message);

// Lower-case event kind name: "llm_call", "tool_result", ... ("unknown" if unset).
std::string EventKindName(const proto::Event& event);

}  // namespace trace::store
