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

}  // namespace trace::recorder
