#include "base/float_text.h"

#include <cstdio>
#include <cstdlib>

namespace trace {

std::string ShortestFloatText(float v) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace trace
