// `trace` on a PostgreSQL store, end to end: record (eight recorders at once lose no
// acknowledged event), replay bit for bit from PostgreSQL, and push/pull between SQLite
// and PostgreSQL losslessly (the JSON exports of both sides are equal), `push --redact`
// leaving no planted secret in the copy.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "testkit/shell.h"
#include "tests/store/store_backend.h"

namespace trace::store {
namespace {

using json = nlohmann::json;
using testing::SharedPgServer;
using ::trace::testing::ReadWholeFile;
using ::trace::testing::ShellQuote;

TRACE_PG_ENVIRONMENT();
TRACE_BACKEND_SUITE(StorePgCli);

const std::string kClientDir = std::string(TRACE_SOURCE_DIR) + "/recorder/clients/python";
const std::string kSecret = "ghp_" + std::string("Zq7Rk2Lm9Xw4Vb8Nc3Hd6Jf1Ts5Gy0Pa2Ue7");

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `trace --store STORE ARGS...` with stdout/stderr captured into files under `dir`.
CliResult Trace(const std::string& dir, const std::string& store,
                const std::vector<std::string>& args, const std::string& tag = "cmd") {
  std::string cmd =
      ShellQuote(std::string(TRACE_BINARY_DIR) + "/bin/trace") + " --store " + ShellQuote(store);
  for (const auto& a : args) cmd.append(" ").append(ShellQuote(a));
  cmd += " >" + dir + "/" + tag + ".out 2>" + dir + "/" + tag + ".err";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(dir + "/" + tag + ".out");
  r.err = ReadWholeFile(dir + "/" + tag + ".err");
  return r;
}

// An agent: two chat completions (the planted secret in the first prompt), then `notes`
// notes; prints "acked N" with the number of events the recorder acknowledged.
std::string WriteAgent(const std::string& dir, int notes) {
  const std::string path = dir + "/agent.py";
  std::ofstream(path) << "import sys, os, json, urllib.request\nsys.path.insert(0, " +
                             json(kClientDir).dump() + ")\nimport trace_client as tc\n" +
                             R"(
def chat(text):
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": os.environ["OPENAI_MODEL"], "max_tokens": 6,
                         "messages": [{"role": "user", "content": text}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())["choices"][0]["message"]["content"]
a = chat("my token is )" + kSecret +
                             R"(, keep it safe")
chat("and then? " + a)
for i in range()" + std::to_string(notes) +
                             R"():
    tc.note("note %d of agent %s" % (i, sys.argv[1]))
tc.flush()
print("acked", 2 + )" + std::to_string(notes) +
                             R"(, flush=True)
)";
  return path;
}

json Parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text.substr(0, 400);
  return j;
}

TEST_P(StorePgCli, RecordReplayAndPushPullBetweenSqliteAndPostgres) {
  const std::string dir = dir_.path();
  const std::string pg = Location("main");
  const std::string agent = WriteAgent(dir, 3);
  auto rec = Trace(dir, pg, {"record", "--seed", "7", "--", "python3", agent, "solo"}, "record");
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  auto ls = Trace(dir, pg, {"ls", "--json"}, "ls");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  json runs = Parse(ls.out);
  ASSERT_EQ(runs.size(), 1u) << ls.out;
  const std::string id = runs[0]["run_id"];
  EXPECT_EQ(runs[0]["status"], "complete");

  // Replay from PostgreSQL: bit for bit.
  auto replay = Trace(dir, pg, {"replay", id, "--json"}, "replay");
  ASSERT_EQ(replay.exit_code, 0) << replay.err << replay.out;
  EXPECT_EQ(Parse(replay.out)["level"], "bitwise") << replay.out;
  EXPECT_EQ(Trace(dir, pg, {"show", id}, "show").exit_code, 0);
  EXPECT_EQ(Trace(dir, pg, {"diff", id, id}, "diff").exit_code, 0);

  // The export as JSON values (protobuf map fields, e.g. the header's env, come out in no
  // fixed order), without the one store-level figure: summary.stored_bytes, what the
  // store's compression made of the rows.
  auto exported = [&](const std::string& store) {
    auto r = Trace(dir, store, {"export", id, "--no-redact"}, "export");
    EXPECT_EQ(r.exit_code, 0) << store << ": " << r.err;
    json j = Parse(r.out);
    if (j.is_object() && j.contains("summary")) j["summary"].erase("stored_bytes");
    return j;
  };
  const json original = exported(pg);
  ASSERT_NE(original.dump().find(kSecret), std::string::npos);
  ASSERT_GE(original["events"].size(), 7u);  // 2 calls, 3 notes, stdout, RunEnd, ...

  // PostgreSQL -> SQLite (pull into the SQLite store), SQLite -> another PostgreSQL.
  const std::string sqlite = dir + "/local.db";
  auto pull = Trace(dir, sqlite, {"pull", id.substr(0, 10), "--from", pg}, "pull");
  ASSERT_EQ(pull.exit_code, 0) << pull.err;
  EXPECT_NE(pull.out.find("pulled " + id), std::string::npos) << pull.out;
  EXPECT_EQ(exported(sqlite), original);
  const std::string pg2 = Location("second");
  auto push = Trace(dir, sqlite, {"push", id, "--to", pg2, "--json"}, "push");
  ASSERT_EQ(push.exit_code, 0) << push.err;
  EXPECT_EQ(Parse(push.out)[0]["result"], "copied") << push.out;
  EXPECT_EQ(exported(pg2), original);
  // The copy replays as the original does.
  auto replay2 = Trace(dir, pg2, {"replay", id, "--json"}, "replay2");
  EXPECT_EQ(replay2.exit_code, 0) << replay2.err;
  // Again: already there, nothing changed.
  push = Trace(dir, sqlite, {"push", id, "--to", pg2, "--json"}, "push");
  ASSERT_EQ(push.exit_code, 0) << push.err;
  EXPECT_EQ(Parse(push.out)[0]["result"], "already there") << push.out;

  // push --redact: the copy holds no secret, and says it was redacted.
  const std::string redacted = dir + "/shared.db";
  auto red = Trace(dir, pg, {"push", id, "--to", "sqlite://" + redacted, "--redact"}, "red");
  ASSERT_EQ(red.exit_code, 0) << red.err;
  EXPECT_NE(red.out.find("redacted"), std::string::npos) << red.out;
  const json copy = exported(redacted);
  EXPECT_EQ(copy.dump().find(kSecret), std::string::npos);
  EXPECT_EQ(copy["events"].size(), original["events"].size());

  // Errors: one line, exit 2.
  auto bad = Trace(dir, pg, {"push", "NOPE", "--to", sqlite}, "bad");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("no run matches 'NOPE' in " + pg), std::string::npos) << bad.err;
  auto down = Trace(dir, "postgresql://trace@127.0.0.1:1/x", {"ls"}, "down");
  EXPECT_EQ(down.exit_code, 2);
  EXPECT_NE(down.err.find("cannot connect"), std::string::npos) << down.err;
  EXPECT_EQ(std::count(down.err.begin(), down.err.end(), '\n'), 1) << down.err;
  auto fsck = Trace(dir, pg, {"fsck"}, "fsck");
  EXPECT_EQ(fsck.exit_code, 2);
  EXPECT_NE(fsck.err.find("fsck checks SQLite store files"), std::string::npos) << fsck.err;

  // rm on PostgreSQL.
  auto rm = Trace(dir, pg2, {"rm", id}, "rm");
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(Parse(Trace(dir, pg2, {"ls", "--json"}, "ls2").out).size(), 0u);
}

// Eight `trace record` processes at once into one new PostgreSQL store: every run is
// complete and holds every event its agent had acknowledged.
TEST_P(StorePgCli, EightRecordersAtOnceLoseNothing) {
  const std::string dir = dir_.path();
  const std::string pg = Location("eight");
  constexpr int kRecorders = 8, kNotes = 25;
  const std::string agent = WriteAgent(dir, kNotes);
  std::vector<pid_t> pids;
  for (int k = 0; k < kRecorders; ++k) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string tag = "rec" + std::to_string(k);
      std::string cmd = ShellQuote(std::string(TRACE_BINARY_DIR) + "/bin/trace") + " --store " +
                        ShellQuote(pg) + " record --seed " + std::to_string(k) + " -- python3 " +
                        ShellQuote(agent) + " " + std::to_string(k) + " >" + dir + "/" + tag +
                        ".out 2>" + dir + "/" + tag + ".err";
      const int status = std::system(cmd.c_str());
      ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
    }
    pids.push_back(pid);
  }
  for (int k = 0; k < kRecorders; ++k) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[k], &status, 0), pids[k]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "recorder " << k << ": " << ReadWholeFile(dir + "/rec" + std::to_string(k) + ".err");
    EXPECT_NE(ReadWholeFile(dir + "/rec" + std::to_string(k) + ".out")
                  .find("acked " + std::to_string(2 + kNotes)),
              std::string::npos);
  }
  json runs = Parse(Trace(dir, pg, {"ls", "--json"}, "ls").out);
  ASSERT_EQ(runs.size(), static_cast<size_t>(kRecorders));
  std::set<std::string> agents;
  for (const json& r : runs) {
    EXPECT_EQ(r["status"], "complete") << r.dump();
    EXPECT_EQ(r["model_calls"], 2) << r.dump();
    const std::string id = r["run_id"];
    auto ex = Trace(dir, pg, {"export", id, "--no-redact"}, "export");
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    json run = Parse(ex.out);
    int notes = 0;
    for (const json& e : run["events"]) {
      if (!e.contains("note")) continue;
      ++notes;
      const std::string text = e["note"]["text"];
      agents.insert(text.substr(text.rfind(' ') + 1));
    }
    EXPECT_EQ(notes, kNotes) << id;
  }
  EXPECT_EQ(agents.size(), static_cast<size_t>(kRecorders));
}

}  // namespace
}  // namespace trace::store
