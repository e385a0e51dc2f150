// Deterministic corpus generator for the tokenizer conformance test and benchmark.
//
// Ownership: returns values. Thread safety: pure functions. Errors: none (a given seed
// always yields the same bytes, on every platform).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trace::engine::testing {

// At least `count` strings covering: English prose and code, Korean, Chinese, Japanese,
// emoji and ZWJ sequences, combining marks (decomposed and out of canonical order),
// runs of spaces/tabs/newlines and Unicode spaces, digits and long numbers, contractions
// in mixed case, Qwen special/added tokens inline (and near misses), invalid UTF-8, long
// single-character runs, and the empty string. Strings may hold arbitrary bytes.
std::vector<std::string> GenerateCorpus(uint64_t seed, size_t count);

// About `bytes` of text for the benchmark: "english" (prose) or "mixed" (every category
// above except invalid UTF-8), newline-separated paragraphs.
std::string GenerateBenchText(const std::string& kind, size_t bytes, uint64_t seed);

}  // namespace trace::engine::testing
