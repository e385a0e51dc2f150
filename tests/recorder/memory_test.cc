// What one request may cost the server in memory (issue 40): `trace serve` with the demo
// model as a process of its own per body, the bodies that cost the most per byte, and the
// growth of its peak resident set (VmHWM) over its resident set after a warm-up request.
//
// Before the limits, a 31.9 MiB body of one-character messages took the server from 96 to
// 1,823 MiB (a 422 after 11.8 s) and a 30 MB prompt to 540 MiB. Now:
//  - a body refused as soon as it is read (too many JSON values, more text than the
//    model's context can take) costs about its own size: growth <= 4 x body + 16 MiB;
//  - a body within the limits costs at most 4 x body + kWithinLimitsSlack, the slack
//    being what the limits allow whatever the body's size: 250,000 values at up to ~540
//    bytes each through the request's copies (two parsed trees, the chat messages, the
//    template's input and values, the rendered prompt and its tokens: 135 MB), or a prompt
//    at the demo model's byte bound (3 MiB) rendered and tokenized (~90 MB).
// Memory, not time: nothing here depends on the machine's speed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "testkit/memory_probe.h"
#include "tests/common/demo_model.h"

namespace trace::recorder {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the probe
using nlohmann::json;

constexpr size_t kMiB = size_t{1} << 20;
// A refused body: the connection's thread, its buffers and the answer.
constexpr size_t kRefusedSlack = 16 * kMiB;
// A body within the limits (above): measured at most 132 MiB (a wide tool schema at the
// value limit), so 160 MiB leaves 20 % for allocator and library differences.
constexpr size_t kWithinLimitsSlack = 160 * kMiB;

const std::string kTrace = std::string(TRACE_BINARY_DIR) + "/bin/trace";

// A sanitizer build (this binary's flags are the server's) measures the sanitizer's shadow
// memory and quarantine, not the server's.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

class ServerMemoryTest : public trace::testing::DemoModelSuite {
 protected:
  void SetUp() override {
    if (kSanitized) GTEST_SKIP() << "peak memory under a sanitizer is the sanitizer's";
  }

  // Sends `body` to a fresh server; checks the answer; returns the growth.
  static size_t Measure(const ProbeBody& body) {
    Measurement m = MeasureInFreshServer(kTrace, model_dir(), demo().file("s.db"), body);
    EXPECT_TRUE(m.error.empty()) << body.name << ": " << m.error;
    EXPECT_EQ(m.reply.status, body.status) << body.name << ": " << m.reply.body;
    const json err = json::parse(m.reply.body, nullptr, false);
    if (!body.code.empty()) {
      EXPECT_EQ(err["error"]["code"], body.code) << body.name << ": " << m.reply.body;
    } else {
      EXPECT_EQ(err["type"], "error") << body.name << ": " << m.reply.body;  // Anthropic's shape
    }
    std::printf("%-40s body %6.2f MiB  growth %7.1f MiB  (%.2f x body)%s\n", body.name.c_str(),
                m.body_bytes / double(kMiB), m.growth / double(kMiB),
                m.growth / double(m.body_bytes), m.peak_reset ? "" : "  [peak since start]");
    return m.growth;
  }
};

// The worst bodies at the size of the default body limit, one server each.
TEST_F(ServerMemoryTest, BodiesRefusedWhenReadCostAboutTheirSize) {
  for (const ProbeBody& body : OversizedBodies(32 * kMiB - 4096)) {
    SCOPED_TRACE(body.name);
    const size_t growth = Measure(body);
    EXPECT_LE(growth, 4 * body.body.size() + kRefusedSlack) << body.name;
  }
}

// Two of them at once, on two connections: each connection costs its own body.
TEST_F(ServerMemoryTest, TwoBodiesAtOnceCostTheirSizesEach) {
  const std::vector<ProbeBody> bodies = OversizedBodies(32 * kMiB - 4096);
  const ProbeBody& body = bodies.front();  // many tiny messages
  ServeProcess server(kTrace, model_dir(), demo().file("s2.db"), "memory-probe-key");
  ASSERT_TRUE(server.ok()) << server.error();
  const bool reset = server.ResetPeak();
  const size_t base = server.Rss();
  ServeProcess::Reply replies[2];
  std::thread other([&] { replies[1] = server.Send(body); });
  replies[0] = server.Send(body);
  other.join();
  const size_t peak = server.PeakRss();
  const size_t growth = peak > base ? peak - base : 0;
  for (const ServeProcess::Reply& r : replies) EXPECT_EQ(r.status, 413) << r.body;
  std::printf("two at once: growth %.1f MiB for 2 x %.1f MiB%s\n", growth / double(kMiB),
              body.body.size() / double(kMiB), reset ? "" : " [peak since start]");
  EXPECT_LE(growth, 2 * (4 * body.body.size() + kRefusedSlack));
}

// Bodies just within the limits, in the shapes that cost the most per byte: the limits
// bound them whatever their size.
TEST_F(ServerMemoryTest, BodiesWithinTheLimitsStayWithinTheSlack) {
  for (const ProbeBody& body : BodiesAtTheLimits()) {
    SCOPED_TRACE(body.name);
    const size_t growth = Measure(body);
    EXPECT_LE(growth, 4 * body.body.size() + kWithinLimitsSlack) << body.name;
  }
}

}  // namespace
}  // namespace trace::recorder
