// Unit tests of the chat-template interpreter that need no Python: loading, errors,
// jinja2 semantics spot checks, thread safety.
#include "engine/template/chat_template.h"

#include <gtest/gtest.h>

namespace trace::engine {
namespace {

Result<std::string> RenderText(std::string_view source, const nlohmann::ordered_json& kwargs =
                                                            nlohmann::ordered_json::object()) {
  TRACE_ASSIGN_OR_RETURN(auto t, ChatTemplate::Parse(source, "test.jinja"));
  return t->RenderOrdered(nlohmann::ordered_json::array(), nullptr, false, kwargs);
}

TEST(ChatTemplate, RendersBasicExpressions) {
  auto r = RenderText("{{ 1 + 2 }}|{{ 'a' ~ 1 }}|{{ [1, 2][::-1] }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "3|a1|[2, 1]");
}

}  // namespace
}  // namespace trace::engine
