// Store::QueryRuns (trace ui's run list) on either backend: pages walked by cursor give
// every run once, in trace ls's order; each filter selects what the same filter applied in
// the test to ListRuns() selects; bad cursors and limits are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "store/store.h"
#include "tests/store/store_backend.h"

namespace trace::store {
namespace {

TRACE_BACKEND_SUITE(StoreQueryRuns);

constexpr int64_t kDayNs = int64_t{86400} * 1'000'000'000;
constexpr int64_t kBaseNs = int64_t{1'796'600'000} * 1'000'000'000;  // 2026-12-06

// 157 runs: three labels, two models, start times with ties (the run id breaks them),
// spread over four days; every third crashed (a SIGNALLED RunEnd), the rest complete.
std::unique_ptr<Store> MakeRuns(const std::string& location) {
  auto st = Store::Open(location);
  EXPECT_TRUE(st.ok()) << st.status().message();
  const char* labels[] = {"nightly", "Ad-Hoc", "ci"};
  for (int i = 0; i < 157; ++i) {
    proto::RunHeader h;
    h.set_start_time_ns(kBaseNs + (i / 2) * (kDayNs / 20));  // pairs share a start time
    h.set_label(labels[i % 3]);
    h.add_argv("python3");
    h.add_argv(i % 5 == 0 ? "Agent_Support.py" : "batch.py");
    h.add_argv("--n=" + std::to_string(i));
    h.mutable_model()->set_model_name(i % 4 == 0 ? "qwen3-tiny" : "llama3-tiny");
    auto w = (*st)->BeginRun(h);
    EXPECT_TRUE(w.ok()) << w.status().message();
    proto::RunEnd end;
    end.set_how(i % 3 == 0 ? proto::RunEnd::SIGNALLED : proto::RunEnd::EXITED);
    EXPECT_TRUE((*w)->End(end).ok());
  }
  return std::move(*st);
}

std::vector<std::string> Ids(const std::vector<RunSummary>& runs) {
  std::vector<std::string> ids;
  for (const RunSummary& r : runs) ids.push_back(r.run_id);
  return ids;
}

// Walks every page of `q`, checking each is full but the last.
std::vector<std::string> WalkPages(Store& store, RunQuery q) {
  std::vector<std::string> ids;
  for (int pages = 0; pages < 1000; ++pages) {
    auto page = store.QueryRuns(q);
    EXPECT_TRUE(page.ok()) << page.status().message();
    if (!page.ok()) break;
    EXPECT_FALSE(page->scan_limited);
    if (!page->next.empty()) EXPECT_EQ(page->runs.size(), q.limit);
    for (const std::string& id : Ids(page->runs)) ids.push_back(id);
    if (page->next.empty()) break;
    q.cursor = page->next;
  }
  return ids;
}

// What `filter` keeps of ListRuns(), in its newest-first order (reversed for oldest).
std::vector<std::string> Expected(Store& store, const std::function<bool(const RunSummary&)>& keep,
                                  bool oldest_first = false) {
  auto all = store.ListRuns();
  EXPECT_TRUE(all.ok());
  std::vector<std::string> ids;
  for (const RunSummary& r : *all) {
    if (keep(r)) ids.push_back(r.run_id);
  }
  if (oldest_first) std::reverse(ids.begin(), ids.end());
  return ids;
}

bool ContainsAsciiCaseless(const std::string& hay, const std::string& needle) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  return lower(hay).find(lower(needle)) != std::string::npos;
}

TEST_P(StoreQueryRuns, PagesGiveEveryRunOnceInListOrder) {
  auto store = MakeRuns(Location("q.db"));
  for (size_t limit : {1u, 7u, 50u, 157u, 1000u}) {
    RunQuery q;
    q.limit = limit;
    std::vector<std::string> got = WalkPages(*store, q);
    EXPECT_EQ(got, Expected(*store, [](const RunSummary&) { return true; })) << "limit " << limit;
    EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), 157u);
    q.oldest_first = true;
    EXPECT_EQ(WalkPages(*store, q), Expected(
                                        *store, [](const RunSummary&) { return true; }, true))
        << "oldest first, limit " << limit;
  }
}

TEST_P(StoreQueryRuns, FiltersSelectWhatTheSameTestOverListRunsSelects) {
  auto store = MakeRuns(Location("q.db"));
  RunQuery q;
  q.limit = 13;
  q.label = "Ad-Hoc";
  EXPECT_EQ(WalkPages(*store, q),
            Expected(*store, [](const RunSummary& r) { return r.label == "Ad-Hoc"; }));
  q = RunQuery{};
  q.limit = 13;
  q.text = "agent_SUPPORT";  // ASCII case folded, command or label
  EXPECT_EQ(WalkPages(*store, q), Expected(*store, [](const RunSummary& r) {
              return ContainsAsciiCaseless(r.command, "agent_SUPPORT") ||
                     ContainsAsciiCaseless(r.label, "agent_SUPPORT");
            }));
  q.text = "ad-hoc";  // a label matches too
  EXPECT_EQ(WalkPages(*store, q),
            Expected(*store, [](const RunSummary& r) { return r.label == "Ad-Hoc"; }));
  q = RunQuery{};
  q.limit = 9;
  q.model = "qwen3";
  q.status = {RunStatus::kCrashed};
  std::vector<std::string> want = Expected(*store, [](const RunSummary& r) {
    return r.model.find("qwen3") != std::string::npos && r.status == RunStatus::kCrashed;
  });
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(WalkPages(*store, q), want);
  q = RunQuery{};
  q.limit = 11;
  q.started_from_ns = kBaseNs + kDayNs;
  q.started_before_ns = kBaseNs + 2 * kDayNs;
  q.oldest_first = true;
  want = Expected(
      *store,
      [](const RunSummary& r) {
        return r.start_time_ns >= kBaseNs + kDayNs && r.start_time_ns < kBaseNs + 2 * kDayNs;
      },
      true);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(WalkPages(*store, q), want);
  q.label = "no such label";
  EXPECT_TRUE(WalkPages(*store, q).empty());
}

TEST_P(StoreQueryRuns, BadCursorsAndLimitsAreRefusedNamingThem) {
  auto store = MakeRuns(Location("q.db"));
  RunQuery q;
  q.limit = 0;
  auto r = store->QueryRuns(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("1 to 1000"), std::string::npos) << r.status().message();
  q.limit = 10;
  for (const char* cursor : {"x", "12.", ".01JD", "12.notarunid", "-5.01M98CEHXE7RV27CJWXF7ZNTEB",
                             "99999999999999999999.01M98CEHXE7RV27CJWXF7ZNTEB"}) {
    q.cursor = cursor;
    r = store->QueryRuns(q);
    ASSERT_FALSE(r.ok()) << cursor;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << cursor;
    EXPECT_NE(r.status().message().find("page cursor"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace trace::store
