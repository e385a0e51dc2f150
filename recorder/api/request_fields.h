// Typed readers for the fields of a JSON request body, shared by every wire format: each
// returns false (and sets *err to a 400 naming the field and the type it has) when the
// field is present with the wrong type; an absent or null field leaves *out unchanged.
//
// Ownership: values. Thread safety: reentrant. Errors: as above; nothing throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

// "null", "boolean", "string", "array", "object", "number" or "integer".
std::string JsonTypeName(const nlohmann::json& v);
// 400: "'param' must be WANT, got TYPE".
ApiError WrongType(const std::string& param, const char* want, const nlohmann::json& got);

bool NumberField(const nlohmann::json& body, const char* key, std::optional<double>* out,
                 std::optional<ApiError>* err);
// An integer within int64 (a float with an integral value is accepted; one outside int64,
// 1e30, is a 400 invalid_value, never cast).
bool IntField(const nlohmann::json& body, const char* key, std::optional<int64_t>* out,
              std::optional<ApiError>* err);
bool BoolField(const nlohmann::json& body, const char* key, bool* out,
               std::optional<ApiError>* err);

// The sampling fields every format shares: temperature (0 to `max_temperature`; 400 with
// code decimal_above_max_value / decimal_below_min_value outside), top_p ((0, 1]), top_k
// (>= 0; an extension except for Anthropic) and seed (signed 64-bit; an extension except
// for Chat Completions). Absent fields keep req's defaults.
std::optional<ApiError> ParseSamplingCore(const nlohmann::json& body, double max_temperature,
                                          CompletionRequest* req);
// A token limit `key` (a positive integer, clamped to int32 and later to the context) into
// req->sampling.max_tokens; absent: `default_limit` (0 with `required`: a 400 naming it).
std::optional<ApiError> ParseTokenLimit(const nlohmann::json& body, const char* key,
                                        int32_t default_limit, bool required,
                                        CompletionRequest* req);

// "where.field": the parameter a member's error names.
std::string FieldPath(const std::string& where, const char* field);
// A required string member `field` of `obj` into *out; absent or not a string: a 400
// naming where.field.
std::optional<ApiError> RequiredStringField(const nlohmann::ordered_json& obj,
                                            const std::string& where, const char* field,
                                            std::string* out);

// Lenient readers for response bodies (what an upstream sent): the member when `obj` is an
// object holding one of the right type, else `fallback`.
std::string StringOr(const nlohmann::json& obj, const char* key, std::string fallback = "");
int64_t IntOr(const nlohmann::json& obj, const char* key, int64_t fallback = 0);
// The member when it is an object or array, else null (a static null json).
const nlohmann::json& MemberOrNull(const nlohmann::json& obj, const char* key);

}  // namespace trace::recorder
