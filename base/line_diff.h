// A line diff of two texts, for people: the run diff's rendered prompts and requests, and
// the divergence report of `trace rerun`.
//
// Ownership: values. Thread safety: reentrant. Errors: none (any two texts diff).
#pragma once

#include <cstddef>
#include <string>

namespace trace {

// Longest common subsequence of lines: changed lines with one line of context, "-" for A,
// "+" for B, at most `max_lines` lines (then a "... (N more lines)" line). Inputs of more
// than 2000 differing lines on a side are shown as all removed, then all added.
std::string LineDiff(const std::string& a, const std::string& b, size_t max_lines = 40);

}  // namespace trace
