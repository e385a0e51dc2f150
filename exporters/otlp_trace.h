// A recorded run as one OTLP trace, following the OpenTelemetry GenAI semantic conventions
// (docs/export.md, "OTLP"; the version is pinned below and in the resource):
//
//   invoke_agent {agent}          INTERNAL, the whole run (root)
//   ├─ chat {model}               CLIENT, one per model call ({operation} {model})
//   └─ execute_tool {tool}        INTERNAL, one per tool call, linked to the call that
//                                 asked for it
//
// Times come from the recording; the trace id is the run id's 128 bits (a ULID), span ids
// are derived from the run id and the event, so exporting a run twice gives the same ids.
// Our own facts (fingerprints, numerics, seeds, logits digests, replay levels, redaction)
// are trace.* attributes. Content (messages, instructions, tool definitions, arguments,
// results, retrieved chunks, template values, agent output) only with `content`.
//
// Ownership: returns a new message. Thread safety: reentrant. Errors: none expected from a
// run that loaded; the Result is for a run without a header run id.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "exporters/replay_levels.h"
#include "exporters/run_data.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace trace::exporters {

// The GenAI semantic conventions version followed, and its schema URL (set on the
// resource and scope; also the resource attribute trace.semconv.version).
inline constexpr char kSemconvVersion[] = "1.41.0";
inline constexpr char kSemconvSchemaUrl[] = "https://opentelemetry.io/schemas/1.41.0";
// The instrumentation scope name.
inline constexpr char kScopeName[] = "trace";

using OtlpRequest = opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;

struct OtlpOptions {
  bool content = false;                  // opt-in content attributes (see above)
  const ReplayLevels* replay = nullptr;  // trace.replay.* when given
};

Result<OtlpRequest> BuildOtlpRequest(const RunData& run, const OtlpOptions& options);

// The trace id of a run: its ULID decoded to 16 big-endian bytes (a ULID is 128 bits), or
// for an id that is not a ULID the first 16 bytes of its SHA-256.
std::array<uint8_t, 16> TraceIdOf(const std::string& run_id);
// The same as 32 lower-case hex digits (how OTLP/JSON and most tools show it).
std::string OtlpTraceIdHex(const std::string& run_id);
// A span id: the first 8 bytes of SHA-256(run id + "/" + key), never all zero.
std::array<uint8_t, 8> SpanIdOf(const std::string& run_id, const std::string& key);

// XXH3-64 over a call's per-token logits digests (little-endian uint64s, in order), as
// 16 hex digits: one value that changes when any step's logits changed
// (trace.logits_digest). Empty for a call without digests.
std::string CombinedLogitsDigest(const proto::LlmCall& call);

// Splits a request into requests of at most `max_spans` spans each (same resource and
// scope), in span order, for collectors that limit request size.
std::vector<OtlpRequest> SplitOtlpRequest(const OtlpRequest& request, size_t max_spans);

}  // namespace trace::exporters
