// Exact equality of two JSON values, for tests that compare two parsers: the same types
// (1 and 1.0 differ, as do 0.0 and -0.0), the same member order, the same bytes.
// nlohmann's operator== compares numbers across types and ordered_json objects by content.
#pragma once

#include <cstring>

#include <nlohmann/json.hpp>

namespace trace::testing {

inline bool SameJson(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b) {
  using Json = nlohmann::ordered_json;
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Json::value_t::object: {
      if (a.size() != b.size()) return false;
      auto x = a.begin();
      for (auto y = b.begin(); y != b.end(); ++x, ++y) {
        if (x.key() != y.key() || !SameJson(x.value(), y.value())) return false;
      }
      return true;
    }
    case Json::value_t::array: {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!SameJson(a[i], b[i])) return false;
      }
      return true;
    }
    case Json::value_t::number_float: {
      const double x = a.get<double>(), y = b.get<double>();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case Json::value_t::discarded:
      return true;
    default:
      return a == b;
  }
}

}  // namespace trace::testing
