// e2e: `trace tokenize` against the library, for TEXT, standard input (bytes exactly as
// given) and --json, and its error for a folder without tokenizer.json.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace trace::engine {
namespace {

using namespace testing;  // NOLINT: test helpers

std::string TraceBinary() {
  const char* env = std::getenv("TRACE_BIN");
  return env != nullptr ? env : std::string(TRACE_BINARY_DIR) + "/bin/trace";
}

// Runs a shell command; returns stdout and sets *rc to the exit status.
std::string Capture(const std::string& command, int* rc) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  *rc = WEXITSTATUS(status);
  return out;
}

// Single-quotes `s` for sh.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<int32_t> ParseIds(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::FILE* f = std::fopen(TraceBinary().c_str(), "r")) {
      std::fclose(f);
    } else {
      GTEST_FAIL() << "no trace binary at " << TraceBinary() << " (build target `trace`)";
    }
    auto loaded = Tokenizer::Load(Qwen3Dir() + "/tokenizer.json");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    tokenizer_ = std::move(loaded).value();
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(TokenizeCli, TextArgumentMatchesLibrary) {
  const std::string text = "Hello world, it's 2024! <|im_start|>user";
  int rc = 0;
  const std::string out =
      Capture(TraceBinary() + " tokenize --model " + Quote(Qwen3Dir()) + " " + Quote(text), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ParseIds(out), tokenizer_->Encode(text));
}

TEST_F(TokenizeCli, StdinBytesExactlyAndJson) {
  // Invalid UTF-8, a combining mark and a trailing newline all reach the tokenizer as is.
  const std::string text = "caf\x65\xCC\x81 \xFF<think>\n";
  const std::string dir = TempDir();
  WriteFile(dir + "/in.txt", text);
  int rc = 0;
  const std::string out = Capture(
      TraceBinary() + " tokenize --model '" + Qwen3Dir() + "' --json - < '" + dir + "/in.txt'",
      &rc);
  EXPECT_EQ(rc, 0);
  const auto json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(json.is_discarded()) << out;
  const auto ids = tokenizer_->Encode(text);
  EXPECT_EQ(json["ids"].get<std::vector<int32_t>>(), ids);
  ASSERT_EQ(json["pieces"].size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(json["pieces"][i].get<std::string>(), tokenizer_->TokenText(ids[i]));
  }
  // Without TEXT, standard input is read too.
  const std::string plain =
      Capture(TraceBinary() + " tokenize --model '" + Qwen3Dir() + "' < '" + dir + "/in.txt'", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ParseIds(plain), ids);
}

TEST_F(TokenizeCli, MissingTokenizerIsOneLineError) {
  const std::string dir = TempDir();
  int rc = 0;
  const std::string err =
      Capture(TraceBinary() + " tokenize --model '" + dir + "' hi 2>&1 >/dev/null", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find(dir + "/tokenizer.json"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
}

}  // namespace
}  // namespace trace::engine
