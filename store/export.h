// JSON views of stored messages: protobuf's canonical JSON of one message and back, used
// by `trace show --json` and by the run export (exporters/run_json.h), and event kind
// names.
//
// Ownership: functions take caller-owned messages and return new strings. Thread safety:
// reentrant. Errors: a message protobuf cannot print or parse is a Status; nothing throws.
#pragma once

#include <google/protobuf/util/json_util.h>

#include <string>

#include "base/status.h"
#include "proto/trace.pb.h"

namespace trace::store {

// Protobuf's canonical JSON mapping (proto field names, every field including defaults;
// 64-bit integers and digests as decimal strings, floats in round-trip form, NaN and
// infinities as strings, bytes as base64): parses back to the identical message.
// Byte-stable: the same message gives the same text in every process (map entries sorted
// by key, where protobuf's own MessageToJsonString follows the map's iteration order), and
// the text is valid UTF-8 (a string field holding invalid bytes, which only a damaged or
// hand-made store can give, has each invalid subpart as U+FFFD: base/utf8.h).
Result<std::string> MessageToJson(const google::protobuf::Message& message);

// The same with the caller's options (the OTLP/JSON encoder's lowerCamelCase names).
Result<std::string> MessageToJson(const google::protobuf::Message& message,
                                  const google::protobuf::util::JsonPrintOptions& options);

// Parses one exported event / header back (used to prove the export lossless).
Status JsonToMessage(const std::string& json, google::protobuf::Message* message);

// Lower-case event kind name: "llm_call", "tool_result", ... ("unknown" if unset).
std::string EventKindName(const proto::Event& event);

}  // namespace trace::store
