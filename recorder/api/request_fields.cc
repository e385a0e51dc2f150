#include "recorder/api/request_fields.h"

#include <cmath>

namespace trace::recorder {

using nlohmann::json;

std::string ApiError::Body() const {
  json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
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

}  // namespace trace::recorder
