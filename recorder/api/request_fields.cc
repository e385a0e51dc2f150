#include "recorder/api/request_fields.h"

#include <cmath>
#include <limits>

#include "base/json_print.h"

namespace trace::recorder {

using nlohmann::json;

std::string ApiError::Body() const {
  json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return JsonText(json{{"error", e}});
}

ApiError BadRequest(std::string param, std::string message) {
  ApiError e;
  e.http_status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

ApiError OutOfRange(const std::string& param, const std::string& message) {
  ApiError e = BadRequest(param, message);
  e.code = "invalid_value";
  return e;
}

std::string JsonTypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::number_float:
      return "number";
    default:
      return "integer";
  }
}

ApiError WrongType(const std::string& param, const char* want, const json& got) {
  return BadRequest(param, "'" + param + "' must be " + want + ", got " + JsonTypeName(got));
}

bool NumberField(const json& body, const char* key, std::optional<double>* out,
                 std::optional<ApiError>* err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number()) {
    *err = WrongType(key, "a number", *it);
    return false;
  }
  *out = it->get<double>();
  return true;
}

bool IntField(const json& body, const char* key, std::optional<int64_t>* out,
              std::optional<ApiError>* err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (it->is_number_float()) {
    // Cast only within [-2^63, 2^63): outside (1e30) the cast would be undefined.
    double d = it->get<double>();
    if (std::floor(d) == d && d >= -0x1p63 && d < 0x1p63) {
      *out = static_cast<int64_t>(d);
      return true;
    }
    if (std::floor(d) == d) {
      *err = OutOfRange(key, "'" + std::string(key) +
                                 "' must fit in a signed 64-bit integer, got " + json(d).dump());
      return false;
    }
  }
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    *err = WrongType(key, "an integer", *it);
    return false;
  }
  if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) {
      *err = OutOfRange(key, "'" + std::string(key) + "' must fit in a signed 64-bit integer");
      return false;
    }
    *out = static_cast<int64_t>(u);
  } else {
    *out = it->get<int64_t>();
  }
  return true;
}

bool BoolField(const json& body, const char* key, bool* out, std::optional<ApiError>* err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *err = WrongType(key, "a boolean", *it);
    return false;
  }
  *out = it->get<bool>();
  return true;
}

std::optional<ApiError> ParseSamplingCore(const json& body, double max_temperature,
                                          CompletionRequest* req) {
  std::optional<ApiError> err;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k, seed;
  if (!NumberField(body, "temperature", &temperature, &err) ||
      !NumberField(body, "top_p", &top_p, &err) || !IntField(body, "top_k", &top_k, &err) ||
      !IntField(body, "seed", &seed, &err)) {
    return err;
  }
  if (temperature) {
    if (!std::isfinite(*temperature) || *temperature < 0 || *temperature > max_temperature) {
      char range[64];
      snprintf(range, sizeof range, "between 0 and %g", max_temperature);
      ApiError e = OutOfRange("temperature", "'temperature' must be " + std::string(range) +
                                                 ", got " + json(*temperature).dump());
      e.code =
          *temperature > max_temperature ? "decimal_above_max_value" : "decimal_below_min_value";
      return e;
    }
    req->sampling.temperature = static_cast<float>(*temperature);
  }
  if (top_p) {
    if (!(*top_p > 0 && *top_p <= 1)) return OutOfRange("top_p", "'top_p' must be in (0, 1]");
    req->sampling.top_p = static_cast<float>(*top_p);
  }
  if (top_k) {
    if (*top_k < 0 || *top_k > std::numeric_limits<int32_t>::max()) {
      return OutOfRange("top_k", "'top_k' must be >= 0 (0: no limit)");
    }
    req->sampling.top_k = static_cast<int32_t>(*top_k);
  }
  req->seed = seed;
  return std::nullopt;
}

std::optional<ApiError> ParseTokenLimit(const json& body, const char* key, int32_t default_limit,
                                        bool required, CompletionRequest* req) {
  std::optional<ApiError> err;
  std::optional<int64_t> limit;
  if (!IntField(body, key, &limit, &err)) return err;
  if (!limit) {
    if (required) return BadRequest(key, std::string("'") + key + "' is required");
    req->sampling.max_tokens = default_limit;
    return std::nullopt;
  }
  if (*limit < 1) {
    return OutOfRange(key, std::string("'") + key + "' must be a positive integer, got " +
                               std::to_string(*limit));
  }
  req->max_tokens_given = true;
  req->sampling.max_tokens =
      static_cast<int32_t>(std::min<int64_t>(*limit, std::numeric_limits<int32_t>::max()));
  return std::nullopt;
}

std::string FieldPath(const std::string& where, const char* field) {
  return where + "." + field;
}

std::optional<ApiError> RequiredStringField(const nlohmann::ordered_json& obj,
                                            const std::string& where, const char* field,
                                            std::string* out) {
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_string()) {
    const std::string path = FieldPath(where, field);
    return BadRequest(path, "'" + path + "' must be a string");
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

std::string StringOr(const json& obj, const char* key, std::string fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

int64_t IntOr(const json& obj, const char* key, int64_t fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return fallback;
  if (it->is_number_float()) return static_cast<int64_t>(it->get<double>());
  return it->get<int64_t>();
}

const json& MemberOrNull(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it != obj.end() && (it->is_object() || it->is_array()) ? *it : kNull;
}

}  // namespace trace::recorder
