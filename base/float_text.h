// ShortestFloatText: the shortest decimal text of a float that reads back to the same float
// ("1e-06", not "9.99999997e-07"), for values a person reads and a program parses again
// (config.json's rms_norm_eps in `trace model init` and `trace model info`).
//
// Ownership: returns a new string. Thread safety: pure function (snprintf and strtof; trace
// never changes the "C" locale). Errors: none; NaN and the infinities come out as printf
// writes them ("nan", "inf", "-inf").
#pragma once

#include <string>

namespace trace {

// printf's %g with the fewest significant digits, from 6 to 9, that round-trip through
// strtof (9 always do).
std::string ShortestFloatText(float v);

}  // namespace trace
