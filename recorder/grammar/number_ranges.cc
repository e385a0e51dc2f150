#include "recorder/grammar/number_ranges.h"

#include <string>
#include <vector>

namespace trace::recorder::grammar {
namespace {

using Expr = GrammarBuilder::Expr;
using u128 = unsigned __int128;

std::string ToDecimal(u128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

u128 Pow10(size_t d) {
  u128 v = 1;
  while (d-- > 0) v *= 10;
  return v;
}

Expr Digit(GrammarBuilder* b) {
  return b->Bytes('0', '9');
}

// Decimal strings of one length, lo <= s <= hi (digit-wise, leading zeros allowed).
Expr SameLength(GrammarBuilder* b, const std::string& lo, const std::string& hi) {
  if (lo.empty()) return b->Empty();
  if (lo == hi) return b->Literal(lo);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return b->Seq({b->Literal(lo.substr(0, 1)), SameLength(b, lo_rest, hi_rest)});
  const bool lo_rest_min = lo_rest.find_first_not_of('0') == std::string::npos;
  const bool hi_rest_max = hi_rest.find_first_not_of('9') == std::string::npos;
  std::vector<Expr> options;
  char from = lo[0], to = hi[0];
  if (!lo_rest_min) {
    options.push_back(b->Seq(
        {b->Literal(lo.substr(0, 1)), SameLength(b, lo_rest, std::string(lo_rest.size(), '9'))}));
    ++from;
  }
  if (!hi_rest_max) {
    options.push_back(b->Seq(
        {b->Literal(hi.substr(0, 1)), SameLength(b, std::string(hi_rest.size(), '0'), hi_rest)}));
    --to;
  }
  if (from <= to) {
    options.push_back(b->Seq({b->Bytes(static_cast<uint8_t>(from), static_cast<uint8_t>(to)),
                              b->Repeat(Digit(b), static_cast<int32_t>(lo_rest.size()),
                                        static_cast<int32_t>(lo_rest.size()))}));
  }
  return b->Alt(std::move(options));
}

// Positive integers without leading zeros in [lo, hi] (lo >= 1; hi absent: unbounded).
Expr PositiveRange(GrammarBuilder* b, u128 lo, std::optional<u128> hi) {
  if (hi && *hi < lo) return b->Alt({});
  const size_t lo_digits = ToDecimal(lo).size();
  std::vector<Expr> options;
  const size_t last = hi ? ToDecimal(*hi).size() : lo_digits;
  for (size_t d = lo_digits; d <= last; ++d) {
    u128 from = std::max(lo, Pow10(d - 1));
    u128 to = Pow10(d) - 1;
    if (hi && *hi < to) to = *hi;
    if (from <= to) options.push_back(SameLength(b, ToDecimal(from), ToDecimal(to)));
  }
  if (!hi) {
    // Every number with more digits than lo.
    options.push_back(
        b->Seq({b->Bytes('1', '9'), b->Repeat(Digit(b), static_cast<int32_t>(lo_digits), -1)}));
  }
  return b->Alt(std::move(options));
}

// Non-negative integers in [lo, hi].
Expr NonNegativeRange(GrammarBuilder* b, u128 lo, std::optional<u128> hi) {
  std::vector<Expr> options;
  if (lo == 0) options.push_back(b->Literal("0"));
  if (!hi || *hi >= 1) options.push_back(PositiveRange(b, lo == 0 ? 1 : lo, hi));
  return b->Alt(std::move(options));
}

u128 Magnitude(int64_t v) {
  return v < 0 ? static_cast<u128>(-(static_cast<__int128>(v))) : static_cast<u128>(v);
}

}  // namespace

Expr AnyInteger(GrammarBuilder* b) {
  return b->Alt(
      {b->Literal("0"), b->Seq({b->Opt(b->Literal("-")), b->Bytes('1', '9'), b->Star(Digit(b))})});
}

Expr AnyNumber(GrammarBuilder* b) {
  Expr integer = b->Alt({b->Literal("0"), b->Seq({b->Bytes('1', '9'), b->Star(Digit(b))})});
  Expr fraction = b->Opt(b->Seq({b->Literal("."), b->Plus(Digit(b))}));
  Expr exponent = b->Opt(b->Seq({b->Class({{'e', 'e'}, {'E', 'E'}}),
                                 b->Opt(b->Class({{'+', '+'}, {'-', '-'}})), b->Plus(Digit(b))}));
  return b->Seq({b->Opt(b->Literal("-")), integer, fraction, exponent});
}

Expr IntegerRange(GrammarBuilder* b, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return b->Alt({});
  std::vector<Expr> options;
  // Negative values: "-" and a magnitude in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    u128 mlo = hi && *hi < 0 ? Magnitude(*hi) : 1;
    std::optional<u128> mhi;
    if (lo) mhi = Magnitude(*lo);
    options.push_back(b->Seq({b->Literal("-"), PositiveRange(b, mlo, mhi)}));
  }
  if ((!lo || *lo <= 0) && (!hi || *hi >= 0)) options.push_back(b->Literal("0"));
  if (!hi || *hi >= 1) {
    u128 plo = lo && *lo > 1 ? static_cast<u128>(*lo) : 1;
    std::optional<u128> phi;
    if (hi) phi = static_cast<u128>(*hi);
    options.push_back(PositiveRange(b, plo, phi));
  }
  return b->Alt(std::move(options));
}

namespace {

// Magnitudes m (integer part and optional fraction) with a <= m <= b (strict where not
// inclusive); b absent: unbounded.
Expr MagnitudeRange(GrammarBuilder* g, u128 a, bool a_incl, std::optional<u128> b, bool b_incl) {
  Expr any_fraction = g->Opt(g->Seq({g->Literal("."), g->Plus(Digit(g))}));
  Expr zero_fraction = g->Opt(g->Seq({g->Literal("."), g->Plus(g->Literal("0"))}));
  Expr nonzero_fraction =
      g->Seq({g->Literal("."), g->Star(Digit(g)), g->Bytes('1', '9'), g->Star(Digit(g))});
  std::vector<Expr> options;
  if (b && *b < a) return g->Alt({});
  if (b && *b == a) {
    if (a_incl && b_incl) options.push_back(g->Seq({g->Literal(ToDecimal(a)), zero_fraction}));
    return g->Alt(std::move(options));
  }
  // Integer part a: the value is a plus its fraction.
  options.push_back(g->Seq({g->Literal(ToDecimal(a)), a_incl ? any_fraction : nonzero_fraction}));
  // Integer parts strictly between: any fraction.
  if (!b) {
    options.push_back(g->Seq({NonNegativeRange(g, a + 1, std::nullopt), any_fraction}));
  } else {
    if (a + 1 <= *b - 1) {
      options.push_back(g->Seq({NonNegativeRange(g, a + 1, *b - 1), any_fraction}));
    }
    // Integer part b: only b itself (a zero fraction), when b is included.
    if (b_incl) options.push_back(g->Seq({g->Literal(ToDecimal(*b)), zero_fraction}));
  }
  return g->Alt(std::move(options));
}

}  // namespace

Expr NumberRange(GrammarBuilder* g, std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<Expr> options;
  // x >= 0, written as a magnitude.
  if (!hi || hi->value > 0 || (hi->value == 0 && hi->inclusive)) {
    u128 a = 0;
    bool a_incl = true;
    if (lo && lo->value >= 0) {
      a = static_cast<u128>(lo->value);
      a_incl = lo->inclusive;
    }
    std::optional<u128> b;
    bool b_incl = true;
    if (hi) {
      b = static_cast<u128>(hi->value);
      b_incl = hi->inclusive;
    }
    options.push_back(MagnitudeRange(g, a, a_incl, b, b_incl));
  }
  // x < 0, written "-" and a magnitude m = -x > 0.
  if (!lo || lo->value < 0) {
    u128 a = 0;
    bool a_incl = false;  // m > 0: no "-0"
    if (hi && hi->value < 0) {
      a = Magnitude(hi->value);
      a_incl = hi->inclusive;
    }
    std::optional<u128> b;
    bool b_incl = true;
    if (lo) {
      b = Magnitude(lo->value);
      b_incl = lo->inclusive;
    }
    options.push_back(g->Seq({g->Literal("-"), MagnitudeRange(g, a, a_incl, b, b_incl)}));
  }
  return g->Alt(std::move(options));
}

}  // namespace trace::recorder::grammar
