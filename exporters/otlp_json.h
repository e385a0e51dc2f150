// OTLP/JSON: the JSON encoding of an OTLP request as the OTLP specification defines it
// (protobuf's JSON mapping with lowerCamelCase names and enums as integers, except that
// trace and span ids are hex strings, not base64).
//
// Ownership: returns a new string. Thread safety: reentrant. Errors: a message protobuf
// cannot print is Internal.
#pragma once

#include <string>

#include "base/status.h"
#include "exporters/otlp_trace.h"

namespace trace::exporters {

Result<std::string> OtlpToJson(const OtlpRequest& request);

}  // namespace trace::exporters
