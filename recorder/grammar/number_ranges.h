// Decimal numbers within bounds as grammar expressions: the integers of a range (no
// leading zeros, no "-0"), and JSON numbers between whole-number bounds (no exponent,
// inclusive or exclusive ends), so that "maximum": 120 cannot come out as 881.
//
// Ownership: adds expressions to the caller's builder. Thread safety: none. Errors: none;
// an empty range yields an expression that matches nothing.
#pragma once

#include <cstdint>
#include <optional>

#include "recorder/grammar/grammar.h"

namespace trace::recorder::grammar {

// Integers n with lo <= n <= hi (absent: unbounded on that side).
GrammarBuilder::Expr IntegerRange(GrammarBuilder* b, std::optional<int64_t> lo,
                                  std::optional<int64_t> hi);

struct NumberBound {
  int64_t value = 0;
  bool inclusive = true;
};
// JSON numbers x (sign, integer part, optional fraction; no exponent) with lo <= x <= hi
// (< when not inclusive).
GrammarBuilder::Expr NumberRange(GrammarBuilder* b, std::optional<NumberBound> lo,
                                 std::optional<NumberBound> hi);

// Any JSON integer / number (exponent included).
GrammarBuilder::Expr AnyInteger(GrammarBuilder* b);
GrammarBuilder::Expr AnyNumber(GrammarBuilder* b);

}  // namespace trace::recorder::grammar
