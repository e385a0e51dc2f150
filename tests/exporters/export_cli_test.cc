// `trace export` end to end on a run recorded by `trace record`, whose agent planted secrets
// in its prompts, tool calls and results, retrieved context, template variables, notes and
// stdout (and got the run's own API key from the recorder). Checks: no redacted export
// (json, otlp-json, otlp) holds any secret, also not through the recorded token ids, while
// --no-redact holds them all; the OTLP output decodes with the official .proto files under
// protobufjs and equals our OTLP/JSON; spans carry the recorded facts; a loopback OTLP/HTTP
// receiver gets the trace with the right path and headers; collector errors are one line.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/tokenizer/tokenizer.h"
#include "exporters/otlp_trace.h"
#include "store/export.h"
#include "store/store.h"
#include "testkit/shell.h"
#include "tests/common/demo_model.h"

extern char** environ;

namespace trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTrace = std::string(TRACE_BINARY_DIR) + "/bin/trace";
const std::string kTool = std::string(TRACE_SOURCE_DIR) + "/tests/exporters/otlp_tool.js";
const std::string kClientDir = std::string(TRACE_SOURCE_DIR) + "/recorder/clients/python";

// Secrets the agent plants, by where they go. The run's own API key is added once known.
std::map<std::string, std::string> Planted() {
  return {
      {"openai", "sk-proj-Q7x2Lm9Kp4Rt8Wv1Zs6Yb3Nc5Hd0Jf2Ga"},     // user prompt
      {"aws", "AKIAQ3EXAMPLEPLANTED"},                             // user prompt
      {"github", "ghp_Plant3dT0kenAbCdEfGhIjKlMnOpQrStUvWx12"},    // system prompt
      {"pem_body", "MIIEvPlantedKeyMaterial0123456789abcdefXYZ"},  // tool result
      {"password", "Tr0ub4dor-planted"},                           // tool result
      {"env", "correct horse battery staple planted"},             // tool result
      {"anthropic", "sk-ant-api03-Pq8Rs1Tu4Vw7Xy0Za3Bc6De9FgHi"},  // context chunk
      {"google", "AIzaSyPlanted0123456789abcdefghijKLMNOP"},       // template value
      {"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlLXBsYW50ZWQ"},  // note
      {"slack", "xoxb-2741-PlantedSlackToken99"},  // agent tool call, stdout
  };
}

const char kAgentScript[] = R"PY(
import json, os, sys, urllib.request
sys.path.insert(0, os.environ["CLIENT_DIR"])
import trace_client as tc
S = json.loads(os.environ["PLANTED"])
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
with open(os.environ["TOKEN_FILE"], "w") as f:
    f.write(key)
model = os.environ.get("OPENAI_MODEL", "demo-tiny")

def chat(messages, **extra):
    body = dict(model=model, messages=messages, **extra)
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                 method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + key)
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())

tools = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up a customer",
    "parameters": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1,
                   "maximum": 9}}, "required": ["id"]}}}]
messages = [{"role": "system", "content": "Deploy with " + S["github"] + " when asked."},
            {"role": "user", "content": "My key is " + S["openai"] + ", AWS id " + S["aws"]}]
tc.context("Keys: " + S["anthropic"], source="kb/keys.md", chunk_id="k1", score=0.5, query="keys")
tc.template_var("api_key", S["google"], template="system")
r = chat(messages, tools=tools, tool_choice="required", parallel_tool_calls=False,
         max_tokens=64, temperature=0)
call = r["choices"][0]["message"]["tool_calls"][0]
result = ("row: password=" + S["password"] + "\n-----BEGIN PRIVATE KEY-----\n" + S["pem_body"] +
          "\n-----END PRIVATE KEY-----\nrun key " + key + "\nenv " + os.environ["PLANTED_DB_PASSWORD"])
tc.tool_result(call["id"], result, name=call["function"]["name"], duration_ms=2.5)
tc.tool_call("fetch", arguments={"token": S["slack"]}, call_id="agent_1")
tc.tool_result("agent_1", "fetched", name="fetch")
tc.note("deploying", data={"auth": "Bearer " + S["jwt"]})
messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
chat(messages, max_tokens=8, temperature=0)
print("done with " + S["slack"] + " and " + key, flush=True)
)PY";

using ::trace::testing::ReadWholeFile;
using ::trace::testing::ShellQuote;

struct CmdResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `ENV... trace --store STORE ARGS...` through the shell.
CmdResult Trace(const std::string& dir, const std::string& store,
                const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env = {}) {
  std::string cmd;
  for (const auto& [k, v] : env) cmd += k + "=" + ShellQuote(v) + " ";
  cmd += ShellQuote(kTrace) + " --store " + ShellQuote(store);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  cmd += " >" + dir + "/cmd.out 2>" + dir + "/cmd.err";
  int status = std::system(cmd.c_str());
  CmdResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(dir + "/cmd.out");
  r.err = ReadWholeFile(dir + "/cmd.err");
  return r;
}

// protobufjs' decode of an OTLP protobuf file, as OTLP/JSON.
json NodeDecode(const std::string& file) {
  std::string out = file + ".node.json";
  std::string cmd =
      "node " + ShellQuote(kTool) + " decode " + ShellQuote(file) + " >" + ShellQuote(out);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return json::parse(ReadWholeFile(out), nullptr, false);
}

// The loopback OTLP/HTTP receiver (otlp_tool.js serve), stopped by closing its stdin.
class Receiver {
 public:
  Receiver(const std::string& log, const std::string& responses) : log_(log) {
    int in[2], out[2];
    EXPECT_EQ(pipe(in), 0);
    EXPECT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<std::string> args = {"node", kTool, "serve", log, responses};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawnp(&pid_, "node", &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    // The first line is "listening PORT".
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    if (line.rfind("listening ", 0) == 0) port_ = std::stoi(line.substr(10));
  }
  ~Receiver() {
    close(stdin_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<json> Requests() const {
    std::vector<json> out;
    std::istringstream in(ReadWholeFile(log_));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

// Every string in `doc` (keys and values) and every base64 "data" value decoded, joined:
// the text a reader of the document could get at.
std::string ReadableText(const json& doc) {
  std::string out;
  if (doc.is_string()) {
    out = doc.get<std::string>();
  } else if (doc.is_structured()) {
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (doc.is_object()) out += it.key() + "\n";
      out += ReadableText(*it) + "\n";
    }
  }
  return out;
}

std::string Base64Decode(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    size_t v = kAlphabet.find(c);
    if (v == std::string::npos) continue;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

class ExportCliTest : public testing::DemoModelSuite {
 protected:
  static void SetUpTestSuite() {
    SetUpDemoModel();
    if (HasFatalFailure()) return;
    const std::string& d = demo().path();
    std::ofstream(d + "/agent.py") << kAgentScript;
    json planted = Planted();
    std::string cmd =
        "CLIENT_DIR=" + ShellQuote(kClientDir) + " PLANTED=" + ShellQuote(planted.dump()) +
        " TOKEN_FILE=" + ShellQuote(d + "/token") +
        " PLANTED_DB_PASSWORD=" + ShellQuote(Planted()["env"]) + " " + ShellQuote(kTrace) +
        " --store " + ShellQuote(d + "/traces.db") + " record --model " + ShellQuote(model_dir()) +
        " --seed 5 -- python3 " + ShellQuote(d + "/agent.py") + " >" + d + "/record.out 2>&1";
    int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadWholeFile(d + "/record.out");
    secrets_ = new std::map<std::string, std::string>(Planted());
    (*secrets_)["run_token"] = ReadWholeFile(d + "/token");
    ASSERT_EQ((*secrets_)["run_token"].rfind("trace-", 0), 0u);
    store::StoreOptions o;
    o.read_only = true;
    auto s = store::Store::Open(d + "/traces.db", o);
    ASSERT_TRUE(s.ok());
    auto runs = (*s)->ListRuns();
    ASSERT_TRUE(runs.ok() && runs->size() == 1u);
    run_id_ = new std::string(runs->front().run_id);
    auto events = (*s)->LoadEvents(*run_id_);
    ASSERT_TRUE(events.ok());
    events_ = new std::vector<proto::Event>(std::move(*events));
  }
  static void TearDownTestSuite() {
    DemoModelSuite::TearDownTestSuite();
    delete secrets_;
    delete run_id_;
    delete events_;
  }

  const std::string& Dir() const { return demo().path(); }
  std::string Store() const { return Dir() + "/traces.db"; }
  // The environment `trace export` runs in: the secret variable is there as on the
  // recording machine.
  std::map<std::string, std::string> Env() const {
    return {{"PLANTED_DB_PASSWORD", Planted()["env"]}};
  }
  CmdResult Export(std::vector<std::string> args,
                   std::map<std::string, std::string> env = {}) const {
    for (const auto& [k, v] : Env()) env.emplace(k, v);
    args.insert(args.begin(), {"export", *run_id_});
    return Trace(Dir(), Store(), args, env);
  }
  // The names of the secrets found in `text`.
  std::vector<std::string> Leaks(const std::string& text) const {
    std::vector<std::string> found;
    for (const auto& [name, secret] : *secrets_) {
      if (text.find(secret) != std::string::npos) found.push_back(name);
    }
    return found;
  }
  std::vector<const proto::LlmCall*> Calls() const {
    std::vector<const proto::LlmCall*> out;
    for (const auto& e : *events_) {
      if (e.has_llm_call()) out.push_back(&e.llm_call());
    }
    return out;
  }

  // The checks, grouped into three tests below: every test process records the run once
  // (about a second of CPU), so fewer processes keep the suite cheap.
  void NoRedactedExportHoldsAPlantedSecret();
  void RedactedExportSaysWhatWasRedactedAndTokenIdsGoWithTheText();
  void OtlpProtobufDecodesWithTheOfficialDefinitionsAndEqualsOtlpJson();
  void SpansCarryTheRecordedFacts();
  void PostsToALoopbackCollectorWithHeaders();
  void CollectorAnswersAndOutagesAreOneLineErrors();
  void ReplayLevelsFromAReplayReport();
  void BadUsageIsAOneLineError();

  static std::map<std::string, std::string>* secrets_;
  static std::string* run_id_;
  static std::vector<proto::Event>* events_;
};
std::map<std::string, std::string>* ExportCliTest::secrets_ = nullptr;
std::string* ExportCliTest::run_id_ = nullptr;
std::vector<proto::Event>* ExportCliTest::events_ = nullptr;

void ExportCliTest::NoRedactedExportHoldsAPlantedSecret() {
  const std::vector<std::string> all = [&] {
    std::vector<std::string> names;
    for (const auto& [name, s] : *secrets_) names.push_back(name);
    return names;
  }();
  // The planted secrets are all in the recording: --no-redact exports every one of them.
  auto r = Export({"--no-redact", "-o", Dir() + "/raw.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json raw = json::parse(ReadWholeFile(Dir() + "/raw.json"));
  EXPECT_EQ(raw["redaction"]["applied"], false);
  std::string raw_text = ReadableText(raw);
  for (const auto& e : raw["events"]) {
    if (e.contains("output")) raw_text += Base64Decode(e["output"]["data"]);
  }
  EXPECT_EQ(Leaks(raw_text), all);
  r = Export({"--no-redact", "--format", "otlp", "--content", "-o", Dir() + "/raw.pb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Leaks(ReadWholeFile(Dir() + "/raw.pb")), all);

  // Redacted (the default): none of them, in any format, whatever the decoding.
  r = Export({"-o", Dir() + "/red.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("redacted "), std::string::npos) << r.err;
  std::string red_bytes = ReadWholeFile(Dir() + "/red.json");
  json red = json::parse(red_bytes);
  std::string red_text = red_bytes + ReadableText(red);
  for (const auto& e : red["events"]) {
    if (e.contains("output")) red_text += Base64Decode(e["output"]["data"]);
    // Every event still parses back, and its JSON fields are still JSON.
    proto::Event back;
    ASSERT_TRUE(store::JsonToMessage(e.dump(), &back).ok()) << e.dump().substr(0, 200);
    if (back.has_llm_call()) {
      EXPECT_FALSE(json::parse(back.llm_call().request_json(), nullptr, false).is_discarded());
      EXPECT_FALSE(json::parse(back.llm_call().response_json(), nullptr, false).is_discarded());
    }
  }
  EXPECT_EQ(Leaks(red_text), std::vector<std::string>{});

  for (const char* format : {"otlp-json", "otlp"}) {
    std::string file = Dir() + "/red." + format;
    r = Export({"--format", format, "--content", "-o", file});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string bytes = ReadWholeFile(file);
    EXPECT_EQ(Leaks(bytes), std::vector<std::string>{}) << format;
    json decoded = std::string(format) == "otlp" ? NodeDecode(file) : json::parse(bytes);
    ASSERT_FALSE(decoded.is_discarded()) << format;
    EXPECT_EQ(Leaks(ReadableText(decoded)), std::vector<std::string>{}) << format;
    // Content attributes that were redacted still parse as the conventions' JSON.
    for (const auto& span : decoded["resourceSpans"][0]["scopeSpans"][0]["spans"]) {
      for (const auto& a : span["attributes"]) {
        std::string key = a["key"];
        if (key == "gen_ai.input.messages" || key == "gen_ai.output.messages") {
          EXPECT_TRUE(json::parse(a["value"]["stringValue"].get<std::string>()).is_array());
        }
      }
    }
  }
}

void ExportCliTest::RedactedExportSaysWhatWasRedactedAndTokenIdsGoWithTheText() {
  auto r = Export({"-o", Dir() + "/red2.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(ReadWholeFile(Dir() + "/red2.json"));
  const json& red = doc["redaction"];
  EXPECT_EQ(red["applied"], true);
  EXPECT_NE(red["note"].get<std::string>().find("tokens level"), std::string::npos);
  std::set<std::string> fields;
  for (const auto& f : red["fields"]) fields.insert(f["field"].get<std::string>());
  for (const char* f : {"llm_call.request_json", "llm_call.rendered_prompt", "tool_result.content",
                        "tool_call.arguments_json", "context_chunk.content", "template_var.value",
                        "note.data_json", "output.data"}) {
    EXPECT_TRUE(fields.count(f)) << f << " not listed as redacted";
  }
  for (const char* rule : {"sk-api-key", "aws-access-key-id", "github-token", "private-key",
                           "secret-assignment", "env:PLANTED_DB_PASSWORD", "anthropic-api-key",
                           "google-api-key", "jwt", "slack-token", "trace-run-token"}) {
    EXPECT_GT(red["by_rule"].value(rule, 0), 0) << rule;
  }
  // Both model calls had secrets in their prompts: their prompt token ids are gone; the
  // outputs had none, so the sampled tokens stay.
  std::vector<uint64_t> call_seqs;
  for (const auto& e : *events_) {
    if (e.has_llm_call()) call_seqs.push_back(e.seq());
  }
  EXPECT_EQ(red["prompt_token_ids_removed"].get<std::vector<uint64_t>>(), call_seqs);
  EXPECT_TRUE(red["sampled_token_ids_removed"].empty());

  // The token ids that remain decode to no secret; without redaction they spell one.
  auto tokenizer = engine::Tokenizer::Load(Dir() + "/model/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  for (const auto& e : doc["events"]) {
    if (!e.contains("llm_call")) continue;
    for (const char* ids : {"prompt_token_ids", "token_ids"}) {
      std::vector<int32_t> v = e["llm_call"][ids].get<std::vector<int32_t>>();
      EXPECT_EQ(Leaks((*tokenizer)->Decode(v)), std::vector<std::string>{}) << ids;
    }
  }
  const proto::LlmCall* first = Calls().front();
  std::vector<int32_t> recorded(first->prompt_token_ids().begin(), first->prompt_token_ids().end());
  EXPECT_FALSE(Leaks((*tokenizer)->Decode(recorded)).empty());
}

void ExportCliTest::OtlpProtobufDecodesWithTheOfficialDefinitionsAndEqualsOtlpJson() {
  for (bool content : {false, true}) {
    std::vector<std::string> extra =
        content ? std::vector<std::string>{"--content"} : std::vector<std::string>{};
    auto args = extra;
    args.insert(args.end(), {"--format", "otlp", "-o", Dir() + "/t.pb"});
    ASSERT_EQ(Export(args).exit_code, 0);
    args = extra;
    args.insert(args.end(), {"--format", "otlp-json", "-o", Dir() + "/t.json"});
    ASSERT_EQ(Export(args).exit_code, 0);
    json from_node = NodeDecode(Dir() + "/t.pb");
    json ours = json::parse(ReadWholeFile(Dir() + "/t.json"));
    EXPECT_EQ(from_node, ours) << "content=" << content;
  }
  // stdout gives the same OTLP/JSON document.
  auto r = Export({"--format", "otlp-json", "--content"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(json::parse(r.out), json::parse(ReadWholeFile(Dir() + "/t.json")));
}

void ExportCliTest::SpansCarryTheRecordedFacts() {
  auto r = Export({"--format", "otlp-json", "--content"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  const json& rs = doc["resourceSpans"][0];
  EXPECT_EQ(rs["schemaUrl"], "https://opentelemetry.io/schemas/1.41.0");
  const json& spans = rs["scopeSpans"][0]["spans"];
  auto attrs = [](const json& span) {
    std::map<std::string, json> out;
    for (const auto& a : span["attributes"]) out[a["key"]] = a["value"];
    return out;
  };
  // The trace id is the run id read as a 128-bit number.
  unsigned __int128 v = 0;
  for (char c : *run_id_) {
    v = (v << 5) | static_cast<unsigned>(std::string("0123456789ABCDEFGHJKMNPQRSTVWXYZ").find(c));
  }
  char hex[33];
  for (int i = 31; i >= 0; --i, v >>= 4) hex[i] = "0123456789abcdef"[static_cast<int>(v & 15)];
  hex[32] = 0;
  std::vector<json> chats, tools;
  json root;
  for (const auto& s : spans) {
    EXPECT_EQ(s["traceId"], hex);
    std::string name = s["name"];
    if (name.rfind("invoke_agent", 0) == 0) root = s;
    if (name.rfind("chat ", 0) == 0) chats.push_back(s);
    if (name.rfind("execute_tool ", 0) == 0) tools.push_back(s);
  }
  ASSERT_FALSE(root.is_null());
  EXPECT_EQ(root["name"], "invoke_agent agent.py");
  EXPECT_FALSE(root.contains("parentSpanId"));
  auto calls = Calls();
  ASSERT_EQ(chats.size(), calls.size());
  ASSERT_EQ(chats.size(), 2u);
  for (size_t i = 0; i < chats.size(); ++i) {
    const proto::LlmCall& c = *calls[i];
    auto a = attrs(chats[i]);
    EXPECT_EQ(chats[i]["kind"], 3);  // CLIENT
    EXPECT_EQ(chats[i]["parentSpanId"], root["spanId"]);
    EXPECT_EQ(chats[i]["name"], "chat " + c.model());
    EXPECT_EQ(chats[i]["startTimeUnixNano"], std::to_string(c.timings().start_ns()));
    EXPECT_EQ(chats[i]["endTimeUnixNano"], std::to_string(c.timings().end_ns()));
    EXPECT_EQ(a["gen_ai.usage.input_tokens"]["intValue"],
              std::to_string(c.prompt_token_ids_size()));
    EXPECT_EQ(a["gen_ai.usage.output_tokens"]["intValue"], std::to_string(c.token_ids_size()));
    EXPECT_EQ(a["gen_ai.response.id"]["stringValue"], c.request_id());
    EXPECT_EQ(a["gen_ai.request.temperature"]["doubleValue"], 0.0);
    EXPECT_EQ(a["gen_ai.request.max_tokens"]["intValue"], i == 0 ? "64" : "8");
    EXPECT_EQ(a["trace.numerics"]["stringValue"], "canonical-v2");
    EXPECT_EQ(a["trace.logits_digest"]["stringValue"], exporters::CombinedLogitsDigest(c));
    json input = json::parse(a["gen_ai.input.messages"]["stringValue"].get<std::string>());
    EXPECT_EQ(input[0]["role"], "system");
    if (i == 1) {
      EXPECT_EQ(input.back()["role"], "tool");
      EXPECT_EQ(input.back()["parts"][0]["type"], "tool_call_response");
    }
  }
  json defs =
      json::parse(attrs(chats[0])["gen_ai.tool.definitions"]["stringValue"].get<std::string>());
  EXPECT_EQ(defs[0]["name"], "lookup");
  ASSERT_EQ(tools.size(), 2u);  // the model's tool call and the agent's own
  auto t0 = attrs(tools[0]);
  EXPECT_EQ(t0["gen_ai.tool.name"]["stringValue"], "lookup");
  EXPECT_EQ(tools[0]["links"][0]["spanId"], chats[0]["spanId"]);
  EXPECT_EQ(attrs(tools[1])["gen_ai.tool.call.id"]["stringValue"], "agent_1");
  EXPECT_EQ(attrs(root)["trace.run.status"]["stringValue"], "complete");
}

void ExportCliTest::PostsToALoopbackCollectorWithHeaders() {
  Receiver rx(Dir() + "/rx1.log", "200");
  ASSERT_GT(rx.port(), 0);
  auto r = Export({"--otlp-endpoint", rx.url(), "--otlp-header", "x-team=red", "--json"},
                  {{"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abc123,x-team=blue"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json summary = json::parse(r.out);
  EXPECT_EQ(summary["otlp"]["url"], rx.url() + "/v1/traces");
  auto requests = rx.Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["method"], "POST");
  EXPECT_EQ(requests[0]["path"], "/v1/traces");
  EXPECT_EQ(requests[0]["headers"]["content-type"], "application/x-protobuf");
  EXPECT_EQ(requests[0]["headers"]["authorization"], "Bearer abc123");
  EXPECT_EQ(requests[0]["headers"]["x-team"], "red");
  ASSERT_TRUE(requests[0]["error"].is_null()) << requests[0]["error"];
  const json& spans = requests[0]["decoded"]["resourceSpans"][0]["scopeSpans"][0]["spans"];
  EXPECT_EQ(summary["otlp"]["spans"], spans.size());
  // What arrived is what --format otlp writes.
  ASSERT_EQ(Export({"--format", "otlp-json", "-o", Dir() + "/same.json"}).exit_code, 0);
  EXPECT_EQ(requests[0]["decoded"], json::parse(ReadWholeFile(Dir() + "/same.json")));
  EXPECT_EQ(summary["redaction"]["applied"], true);
}

void ExportCliTest::CollectorAnswersAndOutagesAreOneLineErrors() {
  {
    Receiver rx(Dir() + "/rx2.log", "503,200");  // busy once, then fine: retried
    auto r = Export({"--otlp-endpoint", rx.url() + "/v1/traces", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["otlp"]["retries"], 1);
    EXPECT_EQ(rx.Requests().size(), 2u);
  }
  {
    Receiver rx(Dir() + "/rx3.log", "400:span kind is invalid");
    auto r = Export({"--otlp-endpoint", rx.url()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "trace: OTLP endpoint " + rx.url() +
                         "/v1/traces answered HTTP 400 Bad Request: span kind is invalid\n");
  }
  {
    Receiver rx(Dir() + "/rx4.log", "partial:2");
    auto r = Export({"--otlp-endpoint", rx.url()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("rejected 2 of "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("spans too old"), std::string::npos) << r.err;
  }
  int closed_port;
  {
    Receiver rx(Dir() + "/rx5.log", "200");
    closed_port = rx.port();
  }
  auto r = Export({"--otlp-endpoint", "http://127.0.0.1:" + std::to_string(closed_port)});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unreachable: could not connect"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

void ExportCliTest::ReplayLevelsFromAReplayReport() {
  auto replay = Trace(Dir(), Store(), {"replay", *run_id_, "--json"});
  ASSERT_NE(replay.exit_code, 2) << replay.err;
  json report = json::parse(replay.out);
  std::ofstream(Dir() + "/replay.json") << replay.out;
  auto r = Export({"--format", "otlp-json", "--replay-report", Dir() + "/replay.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  std::vector<std::string> levels;
  std::string root_level;
  for (const auto& s : doc["resourceSpans"][0]["scopeSpans"][0]["spans"]) {
    for (const auto& a : s["attributes"]) {
      if (a["key"] != "trace.replay.level") continue;
      if (s["name"].get<std::string>().rfind("chat ", 0) == 0)
        levels.push_back(a["value"]["stringValue"]);
      if (s["name"].get<std::string>().rfind("invoke_agent", 0) == 0)
        root_level = a["value"]["stringValue"];
    }
  }
  EXPECT_EQ(root_level, report["level"]);
  ASSERT_EQ(levels.size(), report["calls"].size());
  for (size_t i = 0; i < levels.size(); ++i) EXPECT_EQ(levels[i], report["calls"][i]["level"]);

  report["run_id"] = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
  std::ofstream(Dir() + "/other.json") << report.dump();
  r = Export({"--format", "otlp-json", "--replay-report", Dir() + "/other.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "trace: " + Dir() +
                       "/other.json: the replay report is for run "
                       "01ARZ3NDEKTSV4RRFFQ69G5FAV, not " +
                       *run_id_ + "\n");
}

void ExportCliTest::BadUsageIsAOneLineError() {
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string expect;
  };
  std::ofstream(Dir() + "/bad-rules.txt") << "ok-rule [a-z]+\nbroken (\n";
  std::vector<Case> cases = {
      {{"--format", "xml"}, {}, "export format 'xml' is not supported"},
      {{"--content"}, {}, "--content applies to OTLP output"},
      {{"--otlp-header", "a=b"}, {}, "--otlp-header needs --otlp-endpoint"},
      {{"--otlp-endpoint", "ftp://host"}, {}, "scheme must be http or https"},
      {{"--otlp-endpoint", "http://127.0.0.1:9", "--otlp-header", "novalue"},
       {},
       "is not KEY=VALUE"},
      {{"--otlp-endpoint", "http://127.0.0.1:9"},
       {{"OTEL_EXPORTER_OTLP_HEADERS", "x"}},
       "OTEL_EXPORTER_OTLP_HEADERS: entry 'x' is not KEY=VALUE"},
      {{"--redact-rules", Dir() + "/bad-rules.txt"}, {}, Dir() + "/bad-rules.txt:2: "},
      {{"--redact-rules", Dir() + "/none.txt"}, {}, Dir() + "/none.txt: cannot open"},
      {{"--no-redact", "--redact-rules", Dir() + "/bad-rules.txt"}, {}, "contradict"},
      {{"--json"}, {}, "--json prints a summary"},
      {{"--format", "json", "--otlp-endpoint", "http://127.0.0.1:9"}, {}, "cannot go with it"},
  };
  for (const Case& c : cases) {
    auto r = Export(c.args, c.env);
    EXPECT_EQ(r.exit_code, 2) << c.expect;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << c.expect;
  }
}

TEST_F(ExportCliTest, RedactionKeepsEveryPlantedSecretOutOfEveryExport) {
  NoRedactedExportHoldsAPlantedSecret();
  RedactedExportSaysWhatWasRedactedAndTokenIdsGoWithTheText();
}

TEST_F(ExportCliTest, OtlpDecodesWithTheOfficialDefinitionsAndCarriesTheRecordedFacts) {
  OtlpProtobufDecodesWithTheOfficialDefinitionsAndEqualsOtlpJson();
  SpansCarryTheRecordedFacts();
  ReplayLevelsFromAReplayReport();
}

TEST_F(ExportCliTest, OtlpHttpToALoopbackCollectorAndCommandErrors) {
  PostsToALoopbackCollectorWithHeaders();
  CollectorAnswersAndOutagesAreOneLineErrors();
  BadUsageIsAOneLineError();
}

}  // namespace
}  // namespace trace
