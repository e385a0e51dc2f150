#include "base/line_diff.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <vector>

namespace trace {

std::string LineDiff(const std::string& a, const std::string& b, size_t max_lines) {
  auto split = [](const std::string& s) {
    std::vector<std::string> lines;
    std::string line;
    std::istringstream in(s);
    while (std::getline(in, line)) lines.push_back(line);
    return lines;
  };
  std::vector<std::string> la = split(a), lb = split(b);
  size_t pre = 0;
  while (pre < la.size() && pre < lb.size() && la[pre] == lb[pre]) ++pre;
  size_t suf = 0;
  while (suf < la.size() - pre && suf < lb.size() - pre &&
         la[la.size() - 1 - suf] == lb[lb.size() - 1 - suf]) {
    ++suf;
  }
  std::vector<std::string> ma(la.begin() + pre, la.end() - suf);
  std::vector<std::string> mb(lb.begin() + pre, lb.end() - suf);
  std::vector<std::string> out;
  if (pre > 0) out.push_back("  " + la[pre - 1]);
  const size_t kMaxLcs = 2000;
  if (ma.size() <= kMaxLcs && mb.size() <= kMaxLcs) {
    // LCS table over the differing middle, then walk it.
    std::vector<std::vector<uint16_t>> lcs(ma.size() + 1, std::vector<uint16_t>(mb.size() + 1));
    for (size_t i = ma.size(); i-- > 0;) {
      for (size_t j = mb.size(); j-- > 0;) {
        lcs[i][j] = ma[i] == mb[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    size_t i = 0, j = 0;
    while (i < ma.size() || j < mb.size()) {
      if (i < ma.size() && j < mb.size() && ma[i] == mb[j]) {
        out.push_back("  " + ma[i]);
        ++i;
        ++j;
      } else if (i < ma.size() && (j == mb.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
        out.push_back("- " + ma[i++]);
      } else {
        out.push_back("+ " + mb[j++]);
      }
    }
  } else {
    for (const auto& l : ma) out.push_back("- " + l);
    for (const auto& l : mb) out.push_back("+ " + l);
  }
  if (suf > 0) out.push_back("  " + la[la.size() - suf]);
  std::string text;
  for (size_t k = 0; k < out.size() && k < max_lines; ++k) text += out[k] + "\n";
  if (out.size() > max_lines) {
    text += "  ... (" + std::to_string(out.size() - max_lines) + " more lines)\n";
  }
  return text;
}

}  // namespace trace
