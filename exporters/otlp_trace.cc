#include "exporters/otlp_trace.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "base/build_info.h"
#include "base/hash.h"
#include "base/json_print.h"
#include "base/utf8.h"
#include "exporters/genai_content.h"
#include "exporters/url.h"
#include "store/store.h"

namespace trace::exporters {
namespace {

namespace common = opentelemetry::proto::common::v1;
namespace otrace = opentelemetry::proto::trace::v1;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using KeyValues = google::protobuf::RepeatedPtrField<common::KeyValue>;
using nlohmann::json;

constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// A recorded float as the double with the same shortest decimal form (0.8f -> 0.8, not
// 0.800000011920929), which is what the request said.
double Decimal(float f) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf - 1, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// Appends attributes to a span, event, link or resource.
class Attributes {
 public:
  explicit Attributes(KeyValues* kv) : kv_(kv) {}
  // Text as a string value when it is valid UTF-8 (base/utf8.h, strictly: a proto3 string
  // must be), else as a bytes value holding exactly the recorded bytes.
  void Str(std::string_view key, std::string_view value) { SetText(Add(key), value); }
  void Int(std::string_view key, int64_t value) { Add(key)->set_int_value(value); }
  void Double(std::string_view key, double value) { Add(key)->set_double_value(value); }
  void Bool(std::string_view key, bool value) { Add(key)->set_bool_value(value); }
  void StrList(std::string_view key, const std::vector<std::string>& values) {
    common::ArrayValue* a = Add(key)->mutable_array_value();
    for (const std::string& v : values) SetText(a->add_values(), v);
  }
  void IntList(std::string_view key, const std::vector<int64_t>& values) {
    common::ArrayValue* a = Add(key)->mutable_array_value();
    for (int64_t v : values) a->add_values()->set_int_value(v);
  }
  void Json(std::string_view key, const json& value) { Str(key, JsonText(value)); }
  // Every set scalar or repeated-string field of `m` as PREFIX.field.
  void Fields(const std::string& prefix, const Message& m) {
    const auto* refl = m.GetReflection();
    std::vector<const FieldDescriptor*> fields;
    refl->ListFields(m, &fields);
    for (const FieldDescriptor* f : fields) {
      std::string key = prefix + f->name();
      if (f->is_repeated()) {
        if (f->cpp_type() != FieldDescriptor::CPPTYPE_STRING) continue;
        std::vector<std::string> values;
        for (int i = 0; i < refl->FieldSize(m, f); ++i)
          values.push_back(refl->GetRepeatedString(m, f, i));
        StrList(key, values);
        continue;
      }
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_STRING:
          Str(key, refl->GetString(m, f));
          break;
        case FieldDescriptor::CPPTYPE_INT32:
          Int(key, refl->GetInt32(m, f));
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          Int(key, refl->GetInt64(m, f));
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          Int(key, refl->GetUInt32(m, f));
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          Str(key, std::to_string(refl->GetUInt64(m, f)));  // may not fit an int64
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          Double(key, refl->GetDouble(m, f));
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          Double(key, Decimal(refl->GetFloat(m, f)));
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          Bool(key, refl->GetBool(m, f));
          break;
        case FieldDescriptor::CPPTYPE_ENUM:
          Str(key, refl->GetEnum(m, f)->name());
          break;
        default:
          break;
      }
    }
  }

 private:
  static void SetText(common::AnyValue* v, std::string_view text) {
    if (IsValidUtf8(text)) {
      v->set_string_value(std::string(text));
    } else {
      v->set_bytes_value(std::string(text));
    }
  }
  // A key is a proto3 string: one that holds recorded bytes (an attribute's name) is made
  // valid UTF-8, each invalid subpart U+FFFD.
  common::AnyValue* Add(std::string_view key) {
    common::KeyValue* kv = kv_->Add();
    kv->set_key(SanitizeUtf8(key));
    return kv->mutable_value();
  }
  KeyValues* kv_;
};

std::string Bytes(const uint8_t* data, size_t n) {
  return std::string(reinterpret_cast<const char*>(data), n);
}

std::string Basename(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// gen_ai.agent.name: the run's label, else the agent's script or program name.
std::string AgentName(const proto::RunHeader& h) {
  if (!h.label().empty()) return h.label();
  if (h.argv_size() == 0) return "";
  std::string program = Basename(h.argv(0));
  static const std::set<std::string> kLaunchers = {"python", "python3", "node", "bash", "sh",
                                                   "ruby",   "perl",    "deno", "bun",  "uv",
                                                   "npx",    "java",    "env",  "tsx"};
  bool launcher = kLaunchers.count(program) > 0 || program.rfind("python3.", 0) == 0;
  if (launcher) {
    for (int i = 1; i < h.argv_size(); ++i) {
      const std::string& a = h.argv(i);
      if (a.empty() || a[0] == '-' || a == "run") continue;
      return Basename(a);
    }
  }
  return program;
}

// gen_ai.provider.name: "trace" for our own engine; for a proxied run, the upstream's
// provider when its host is a well-known one, else the wire format's (the conventions use
// the provider as the discriminator of the API flavour).
std::string ProviderName(const std::string& upstream_host, WireFormat format, bool proxied) {
  if (!proxied) return "trace";
  auto ends = [&](std::string_view suffix) {
    return upstream_host.size() >= suffix.size() &&
           upstream_host.compare(upstream_host.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("api.openai.com")) return "openai";
  if (ends(".openai.azure.com")) return "azure.ai.openai";
  if (ends("api.anthropic.com")) return "anthropic";
  if (ends("api.deepseek.com")) return "deepseek";
  if (ends("api.groq.com")) return "groq";
  if (ends("api.mistral.ai")) return "mistral_ai";
  if (ends("api.x.ai")) return "x_ai";
  if (ends("api.perplexity.ai")) return "perplexity";
  if (ends("generativelanguage.googleapis.com")) return "gcp.gemini";
  if (ends("aiplatform.googleapis.com")) return "gcp.vertex_ai";
  if (ends("api.cohere.com") || ends("api.cohere.ai")) return "cohere";
  if (upstream_host.rfind("bedrock-runtime.", 0) == 0) return "aws.bedrock";
  return format == WireFormat::kAnthropicMessages ? "anthropic" : "openai";
}

const char* RunEndName(proto::RunEnd::How how) {
  switch (how) {
    case proto::RunEnd::EXITED:
      return "exited";
    case proto::RunEnd::SIGNALLED:
      return "signalled";
    case proto::RunEnd::RECORDER_KILLED:
      return "recorder_killed";
    case proto::RunEnd::RECORDER_ERROR:
      return "recorder_error";
    default:
      return "unspecified";
  }
}

int64_t UsageValue(const json& response, std::initializer_list<const char*> keys) {
  if (!response.is_object() || !response.contains("usage") || !response["usage"].is_object()) {
    return -1;
  }
  const json& u = response["usage"];
  for (const char* k : keys) {
    if (u.contains(k) && u[k].is_number_integer()) return u[k].get<int64_t>();
  }
  return -1;
}

// An embeddings call's attributes (semconv v1.41): gen_ai.request.encoding_formats when the
// request named one, gen_ai.embeddings.dimension.count from the request's `dimensions`,
// else the length of the first vector answered (a float array, or base64 of float32s).
void AddEmbeddingsAttributes(const proto::LlmCall& c, Attributes* a) {
  json req = json::parse(c.request_json(), nullptr, /*allow_exceptions=*/false);
  if (req.is_object() && req.contains("encoding_format") && req["encoding_format"].is_string()) {
    a->StrList("gen_ai.request.encoding_formats", {req["encoding_format"].get<std::string>()});
  }
  int64_t dims = -1;
  if (req.is_object() && req.contains("dimensions") && req["dimensions"].is_number_integer()) {
    dims = req["dimensions"].get<int64_t>();
  } else if (c.http_status() == 200 || c.http_status() == 0) {
    json res = json::parse(c.response_json(), nullptr, /*allow_exceptions=*/false);
    const json* e = nullptr;
    if (res.is_object() && res.contains("data") && res["data"].is_array() && !res["data"].empty() &&
        res["data"][0].is_object() && res["data"][0].contains("embedding")) {
      e = &res["data"][0]["embedding"];
    }
    if (e != nullptr && e->is_array()) {
      dims = static_cast<int64_t>(e->size());
    } else if (e != nullptr && e->is_string()) {
      const std::string& b64 = e->get_ref<const std::string&>();
      size_t pad = 0;
      while (pad < 2 && b64.size() > pad && b64[b64.size() - 1 - pad] == '=') ++pad;
      dims = static_cast<int64_t>((b64.size() / 4 * 3 - pad) / 4);
    }
  }
  if (dims >= 0) a->Int("gen_ai.embeddings.dimension.count", dims);
}

struct SpanIds {
  std::string run_id;
  std::string trace_id;
  std::string Of(const std::string& key) const {
    auto id = SpanIdOf(run_id, key);
    return Bytes(id.data(), id.size());
  }
};

// Per event seq, the redaction lines of that event (for trace.redaction.fields).
std::map<std::string, std::vector<std::string>> RedactionLinesByWhere(const RunData& run) {
  std::map<std::string, std::vector<std::string>> out;
  redact::RedactionReport one;
  for (const auto& f : run.redaction.fields) {
    one.fields = {f};
    out[f.where].push_back(RedactedFieldLines(one).front());
  }
  return out;
}

struct ToolSpanSource {
  const proto::Event* call = nullptr;    // ToolCall event
  const proto::Event* result = nullptr;  // ToolResult event
  const proto::ToolCall* tool_call() const { return call ? &call->tool_call() : nullptr; }
  const proto::ToolResult* tool_result() const { return result ? &result->tool_result() : nullptr; }
};

}  // namespace

std::array<uint8_t, 16> TraceIdOf(const std::string& run_id) {
  std::array<uint8_t, 16> out{};
  if (store::IsValidRunId(run_id)) {
    unsigned __int128 v = 0;
    for (char c : run_id)
      v = (v << 5) | static_cast<unsigned>(std::strchr(kCrockford, c) - kCrockford);
    for (int i = 15; i >= 0; --i) {
      out[i] = static_cast<uint8_t>(v & 0xff);
      v >>= 8;
    }
    if (std::any_of(out.begin(), out.end(), [](uint8_t b) { return b != 0; })) return out;
  }
  std::string hex = Sha256Hex(run_id);
  for (size_t i = 0; i < 16; ++i)
    out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

std::string OtlpTraceIdHex(const std::string& run_id) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : TraceIdOf(run_id)) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::array<uint8_t, 8> SpanIdOf(const std::string& run_id, const std::string& key) {
  std::array<uint8_t, 8> out{};
  std::string hex = Sha256Hex(run_id + "/" + key);
  for (size_t i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  if (std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0; })) out[7] = 1;
  return out;
}

std::string CombinedLogitsDigest(const proto::LlmCall& call) {
  if (call.logits_digests_size() == 0) return "";
  std::string bytes;
  bytes.reserve(8 * call.logits_digests_size());
  for (uint64_t d : call.logits_digests()) {
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>((d >> (8 * b)) & 0xff));
  }
  return DigestHex(Digest64(bytes.data(), bytes.size()));
}

namespace {

// What the spans need from across the run, gathered before any span is written.
struct RunFacts {
  const proto::Event* run_end = nullptr;
  int64_t last_ns = 0;                                                       // latest time seen
  std::map<uint64_t, std::vector<const proto::ToolCall*>> model_tool_calls;  // by LlmCall seq
  std::map<uint64_t, int> call_numbers;                                      // seq -> 1-based
  std::string request_model;  // the first model call's, for the root
};

RunFacts ScanRun(const RunData& run) {
  RunFacts f;
  f.last_ns = run.header.start_time_ns();
  for (const proto::Event& e : run.events) {
    f.last_ns = std::max(f.last_ns, e.wall_time_ns());
    if (e.has_run_end()) f.run_end = &e;
    if (e.has_llm_call()) {
      f.call_numbers[e.seq()] = static_cast<int>(f.call_numbers.size()) + 1;
      f.last_ns = std::max(f.last_ns, e.llm_call().timings().end_ns());
      if (f.request_model.empty()) f.request_model = e.llm_call().model();
    }
    if (e.has_tool_call() && e.tool_call().llm_call_seq() != 0) {
      f.model_tool_calls[e.tool_call().llm_call_seq()].push_back(&e.tool_call());
    }
  }
  return f;
}

// Where the model calls went: the upstream for a proxied run, else our own server.
struct CallTarget {
  bool proxied = false;
  std::optional<HttpUrl> server;  // none when its URL does not parse
};

CallTarget CallTargetOf(const proto::RunHeader& h) {
  CallTarget target;
  auto upstream_it = h.attributes().find("upstream");
  target.proxied = upstream_it != h.attributes().end() && !upstream_it->second.empty();
  Result<HttpUrl> url = ParseHttpUrl(target.proxied ? upstream_it->second : h.endpoint());
  if (url.ok()) target.server = *url;
  return target;
}

// What every span of one export shares: the run and the options, the ids, where the model
// calls went, and the facts gathered across the run.
struct ExportContext {
  ExportContext(const RunData& run, const OtlpOptions& options, const std::string& run_id)
      : run(run),
        options(options),
        run_id(run_id),
        ids{run_id, TraceIdBytes(run_id)},
        root_id(ids.Of("run")),
        redaction_lines(RedactionLinesByWhere(run)),
        agent(AgentName(run.header)),
        facts(ScanRun(run)),
        target(CallTargetOf(run.header)) {}

  // gen_ai.provider.name of a call made in `format` (the run's own: chat completions).
  std::string Provider(WireFormat format) const {
    return ProviderName(target.proxied && target.server ? target.server->host : "", format,
                        target.proxied);
  }

  const RunData& run;
  const OtlpOptions& options;
  const std::string run_id;
  const SpanIds ids;
  const std::string root_id;
  const std::map<std::string, std::vector<std::string>> redaction_lines;
  const std::string agent;
  const RunFacts facts;
  const CallTarget target;

 private:
  static std::string TraceIdBytes(const std::string& run_id) {
    const auto bytes = TraceIdOf(run_id);
    return Bytes(bytes.data(), bytes.size());
  }
};

// A new span of the run's trace, its id derived from `key`, under `parent` unless empty.
otrace::Span* AddSpan(const ExportContext& ctx, otrace::ScopeSpans* ss, const std::string& key,
                      const std::string& parent, const std::string& name,
                      otrace::Span::SpanKind kind) {
  otrace::Span* span = ss->add_spans();
  span->set_trace_id(ctx.ids.trace_id);
  span->set_span_id(ctx.ids.Of(key));
  if (!parent.empty()) span->set_parent_span_id(parent);
  span->set_name(name);
  span->set_kind(kind);
  return span;
}

// A span ends at `end` and never starts after it.
void SetSpanTimes(int64_t start, int64_t end, otrace::Span* span) {
  span->set_start_time_unix_nano(static_cast<uint64_t>(std::min(start, end)));
  span->set_end_time_unix_nano(static_cast<uint64_t>(end));
}

// trace.redaction.fields: the redaction lines of `events` (null ones skipped), when any.
void AddRedactionFields(const ExportContext& ctx, std::initializer_list<const proto::Event*> events,
                        Attributes* a) {
  std::vector<std::string> lines;
  for (const proto::Event* src : events) {
    if (!src) continue;
    auto it = ctx.redaction_lines.find("seq " + std::to_string(src->seq()));
    if (it != ctx.redaction_lines.end())
      lines.insert(lines.end(), it->second.begin(), it->second.end());
  }
  if (!lines.empty()) a->StrList("trace.redaction.fields", lines);
}

void AddResourceAttributes(const proto::RunHeader& h, const std::string& agent,
                           otrace::ResourceSpans* rs) {
  Attributes res(rs->mutable_resource()->mutable_attributes());
  res.Str("service.name", agent.empty() ? "trace-agent" : agent);
  if (!h.hostname().empty()) res.Str("host.name", h.hostname());
  if (!h.device().os().empty()) res.Str("os.description", h.device().os());
  res.Str("telemetry.sdk.name", "trace");
  res.Str("telemetry.sdk.language", "cpp");
  res.Str("telemetry.sdk.version", TRACE_VERSION);
  res.Str("trace.semconv.version", kSemconvVersion);
  res.Int("trace.format_version", h.format_version());
}

otrace::ScopeSpans* AddScope(otrace::ResourceSpans* rs) {
  otrace::ScopeSpans* ss = rs->add_scope_spans();
  ss->set_schema_url(kSemconvSchemaUrl);
  ss->mutable_scope()->set_name(kScopeName);
  ss->mutable_scope()->set_version(TRACE_VERSION);
  return ss;
}

// The root span, the whole run: from the header's start to the run's end (or the last
// thing recorded, for a run cut off). Its attributes come last, once the calls are counted.
otrace::Span* AddRootSpan(const ExportContext& ctx, otrace::ScopeSpans* ss) {
  const proto::RunHeader& h = ctx.run.header;
  otrace::Span* root =
      AddSpan(ctx, ss, "run", "", ctx.agent.empty() ? "invoke_agent" : "invoke_agent " + ctx.agent,
              otrace::Span::SPAN_KIND_INTERNAL);
  root->set_start_time_unix_nano(static_cast<uint64_t>(h.start_time_ns()));
  root->set_end_time_unix_nano(static_cast<uint64_t>(
      ctx.facts.run_end ? std::max(ctx.facts.run_end->wall_time_ns(), h.start_time_ns())
                        : ctx.facts.last_ns));
  return root;
}

// The request's sampling parameters. An embeddings call samples nothing: no sampling
// parameters (its recorded params are unset, not zero), but what the conventions give that
// operation.
void AddSamplingAttributes(const proto::LlmCall& c, bool embeddings, Attributes* a) {
  const proto::SamplingParams& p = c.params();
  if (embeddings) {
    AddEmbeddingsAttributes(c, a);
  } else {
    a->Double("gen_ai.request.temperature", Decimal(p.temperature()));
  }
  if (p.top_p() > 0) a->Double("gen_ai.request.top_p", Decimal(p.top_p()));
  if (p.top_k() > 0) a->Double("gen_ai.request.top_k", p.top_k());
  if (p.max_tokens() > 0) a->Int("gen_ai.request.max_tokens", p.max_tokens());
  if (p.has_seed()) a->Int("gen_ai.request.seed", static_cast<int64_t>(p.seed()));
  if (p.stop_size() > 0)
    a->StrList("gen_ai.request.stop_sequences", {p.stop().begin(), p.stop().end()});
  if (p.frequency_penalty() != 0)
    a->Double("gen_ai.request.frequency_penalty", Decimal(p.frequency_penalty()));
  if (p.presence_penalty() != 0)
    a->Double("gen_ai.request.presence_penalty", Decimal(p.presence_penalty()));
  if (p.n() > 1) a->Int("gen_ai.request.choice.count", p.n());
  if (c.stream()) a->Bool("gen_ai.request.stream", true);
}

// The tokens of the whole run, summed over its model calls for the root.
struct UsageTotals {
  int64_t input = 0;
  int64_t output = 0;
};

// What came back: response id and model, finish reason, token usage (the sampled ids, else
// the answer's usage), the server, and the HTTP status (an error status marks the span).
void AddResponseAttributes(const ExportContext& ctx, const proto::LlmCall& c, bool embeddings,
                           otrace::Span* span, Attributes* a, UsageTotals* usage) {
  json response = json::parse(c.response_json(), nullptr, /*allow_exceptions=*/false);
  if (!c.request_id().empty()) a->Str("gen_ai.response.id", c.request_id());
  std::string response_model =
      response.is_object() && response.contains("model") && response["model"].is_string()
          ? response["model"].get<std::string>()
          : (!ctx.target.proxied ? ctx.run.header.model().model_name() : "");
  if (!response_model.empty()) a->Str("gen_ai.response.model", response_model);
  if (!c.finish_reason().empty() && !embeddings)
    a->StrList("gen_ai.response.finish_reasons", {c.finish_reason()});
  int64_t in = c.prompt_token_ids_size() > 0
                   ? c.prompt_token_ids_size()
                   : UsageValue(response, {"prompt_tokens", "input_tokens"});
  int64_t out = c.token_ids_size() > 0
                    ? c.token_ids_size()
                    : UsageValue(response, {"completion_tokens", "output_tokens"});
  if (in >= 0) {
    a->Int("gen_ai.usage.input_tokens", in);
    usage->input += in;
  }
  if (out >= 0) {
    a->Int("gen_ai.usage.output_tokens", out);
    usage->output += out;
  }
  if (c.prompt_tokens_reused() > 0) {
    a->Int("gen_ai.usage.cache_read.input_tokens", c.prompt_tokens_reused());
  }
  if (ctx.target.server) {
    a->Str("server.address", ctx.target.server->host);
    a->Int("server.port", ctx.target.server->port);
  }
  if (c.http_status() != 0) a->Int("http.response.status_code", c.http_status());
  if (c.http_status() != 0 && c.http_status() != 200) {
    a->Str("error.type", std::to_string(c.http_status()));
    span->mutable_status()->set_code(otrace::Status::STATUS_CODE_ERROR);
    span->mutable_status()->set_message(c.error().substr(0, 1024));
  }
}

// Opt-in content: instructions, messages in and out, tool definitions, the constraint.
void AddCallContentAttributes(const ExportContext& ctx, const proto::Event& e, Attributes* a) {
  const proto::LlmCall& c = e.llm_call();
  auto tool_calls = ctx.facts.model_tool_calls.find(e.seq());
  GenAiContent content = ContentOf(c, tool_calls != ctx.facts.model_tool_calls.end()
                                          ? tool_calls->second
                                          : std::vector<const proto::ToolCall*>{});
  if (!content.system_instructions.is_null()) {
    a->Json("gen_ai.system_instructions", content.system_instructions);
  }
  a->Json("gen_ai.input.messages", content.input_messages);
  if (!content.output_messages.empty()) a->Json("gen_ai.output.messages", content.output_messages);
  if (!content.tool_definitions.is_null()) {
    a->Json("gen_ai.tool.definitions", content.tool_definitions);
  }
  if (!c.constraint_json().empty()) a->Str("trace.constraint", c.constraint_json());
}

// Our own facts of a model call: where it is in the run, how it was computed, and (with a
// replay report) how far its replay reproduced it.
void AddCallTraceAttributes(const ExportContext& ctx, const proto::Event& e, Attributes* a) {
  const proto::LlmCall& c = e.llm_call();
  const int number = ctx.facts.call_numbers.at(e.seq());
  a->Int("trace.event.seq", static_cast<int64_t>(e.seq()));
  a->Int("trace.call.number", number);
  a->Str("trace.call.endpoint", c.endpoint());
  if (!c.numerics().empty()) a->Str("trace.numerics", c.numerics());
  a->Str("trace.seed_used", std::to_string(c.seed_used()));
  if (c.batch_size() > 0) a->Int("trace.batch_size", c.batch_size());
  a->Int("trace.sampled_tokens", c.token_ids_size());
  std::string digest = CombinedLogitsDigest(c);
  if (!digest.empty()) {
    a->Str("trace.logits_digest", digest);
    a->Int("trace.logits_digest_scheme", static_cast<int64_t>(c.logits_digest_scheme()));
  }
  if (c.num_layers() > 0) a->Int("trace.layer_digests.layers", c.num_layers());
  if (c.timings().queue_ms() > 0) a->Double("trace.timings.queue_ms", c.timings().queue_ms());
  if (c.timings().prefill_ms() > 0) a->Double("trace.timings.prefill_ms", c.timings().prefill_ms());
  if (c.timings().decode_ms() > 0) a->Double("trace.timings.decode_ms", c.timings().decode_ms());
  if (ctx.options.replay) {
    auto lv = ctx.options.replay->call_levels.find(number);
    auto sk = ctx.options.replay->skipped.find(number);
    if (lv != ctx.options.replay->call_levels.end()) {
      a->Str("trace.replay.level", lv->second);
    } else if (sk != ctx.options.replay->skipped.end()) {
      a->Str("trace.replay.level", "skipped");
      a->Str("trace.replay.skipped_reason", sk->second);
    } else {
      a->Str("trace.replay.level", "not_replayed");
    }
  }
}

// One CLIENT span per model call, under the root, from the call's start to its end (or
// back from its end by its total time, for a call recorded without a start).
void AddModelCallSpan(const ExportContext& ctx, const proto::Event& e, otrace::ScopeSpans* ss,
                      UsageTotals* usage) {
  const proto::LlmCall& c = e.llm_call();
  const WireFormat format = WireFormatOf(c.endpoint());
  const std::string operation = OperationName(format);
  otrace::Span* span = AddSpan(ctx, ss, "seq:" + std::to_string(e.seq()), ctx.root_id,
                               c.model().empty() ? operation : operation + " " + c.model(),
                               otrace::Span::SPAN_KIND_CLIENT);
  int64_t end = c.timings().end_ns() > 0 ? c.timings().end_ns() : e.wall_time_ns();
  int64_t start = c.timings().start_ns() > 0
                      ? c.timings().start_ns()
                      : end - static_cast<int64_t>(c.timings().total_ms() * 1e6);
  SetSpanTimes(start, end, span);

  Attributes a(span->mutable_attributes());
  a.Str("gen_ai.operation.name", operation);
  a.Str("gen_ai.provider.name", ctx.Provider(format));
  if (!c.model().empty()) a.Str("gen_ai.request.model", c.model());
  a.Str("gen_ai.conversation.id", ctx.run_id);  // the run is the session that groups the calls
  const bool embeddings = format == WireFormat::kEmbeddings;
  AddSamplingAttributes(c, embeddings, &a);
  AddResponseAttributes(ctx, c, embeddings, span, &a, usage);
  if (ctx.options.content && !embeddings) AddCallContentAttributes(ctx, e, &a);
  AddCallTraceAttributes(ctx, e, &a);
  AddRedactionFields(ctx, {&e}, &a);
}

// The tool spans' sources: one per call id (a call and its result), in order of
// appearance; a call or result without an id, or whose id is already paired, stands alone.
std::vector<ToolSpanSource> PairToolEvents(const std::vector<proto::Event>& events) {
  std::vector<ToolSpanSource> tools;
  std::map<std::string, size_t> open_by_id;
  for (const proto::Event& e : events) {
    if (e.has_tool_call()) {
      const std::string& id = e.tool_call().call_id();
      auto it = id.empty() ? open_by_id.end() : open_by_id.find(id);
      if (it != open_by_id.end() && tools[it->second].call == nullptr) {
        tools[it->second].call = &e;
      } else {
        if (!id.empty()) open_by_id[id] = tools.size();
        tools.push_back({&e, nullptr});
      }
    } else if (e.has_tool_result()) {
      const std::string& id = e.tool_result().call_id();
      auto it = id.empty() ? open_by_id.end() : open_by_id.find(id);
      if (it != open_by_id.end() && tools[it->second].result == nullptr) {
        tools[it->second].result = &e;
      } else {
        if (!id.empty()) open_by_id[id] = tools.size();
        tools.push_back({nullptr, &e});
      }
    }
  }
  return tools;
}

// The tool's attributes; a result that is an error marks the span.
void AddToolAttributes(const ExportContext& ctx, const ToolSpanSource& t, const std::string& name,
                       otrace::Span* span, Attributes* a) {
  const proto::ToolCall* call = t.tool_call();
  const proto::ToolResult* result = t.tool_result();
  std::string call_id = call ? call->call_id() : result->call_id();
  a->Str("gen_ai.operation.name", "execute_tool");
  a->Str("gen_ai.tool.name", name);
  if (!call_id.empty()) a->Str("gen_ai.tool.call.id", call_id);
  a->Str("gen_ai.tool.type", "function");
  if (ctx.options.content && call) a->Str("gen_ai.tool.call.arguments", call->arguments_json());
  if (ctx.options.content && result && !result->is_error()) {
    a->Str("gen_ai.tool.call.result", result->content());
  }
  if (result && result->is_error()) {
    a->Str("error.type", "tool_error");
    span->mutable_status()->set_code(otrace::Status::STATUS_CODE_ERROR);
    if (ctx.options.content) span->mutable_status()->set_message(result->content().substr(0, 1024));
  }
  if (call) {
    a->Str("trace.tool.source", call->source());
    a->Int("trace.tool_call.seq", static_cast<int64_t>(t.call->seq()));
  }
  if (t.result) a->Int("trace.tool_result.seq", static_cast<int64_t>(t.result->seq()));
  a->Bool("trace.tool.result_recorded", t.result != nullptr);
}

// One INTERNAL span per tool call, under the root, linked to the model call that asked
// for it.
void AddToolSpan(const ExportContext& ctx, const ToolSpanSource& t, otrace::ScopeSpans* ss) {
  const proto::ToolCall* call = t.tool_call();
  const proto::ToolResult* result = t.tool_result();
  const proto::Event& first = t.call ? *t.call : *t.result;
  std::string name = call && !call->name().empty() ? call->name() : result ? result->name() : "";
  otrace::Span* span = AddSpan(ctx, ss, "tool:" + std::to_string(first.seq()), ctx.root_id,
                               name.empty() ? "execute_tool" : "execute_tool " + name,
                               otrace::Span::SPAN_KIND_INTERNAL);
  // From the call's time to the result's; a result reporting its duration starts there.
  int64_t end = t.result ? t.result->wall_time_ns() : first.wall_time_ns();
  int64_t start = t.call ? t.call->wall_time_ns() : end;
  if (result && result->duration_ms() > 0) {
    int64_t reported = end - static_cast<int64_t>(result->duration_ms() * 1e6);
    start = t.call ? std::max(start, reported) : reported;
  }
  SetSpanTimes(start, end, span);
  Attributes a(span->mutable_attributes());
  AddToolAttributes(ctx, t, name, span, &a);
  if (call && call->llm_call_seq() != 0 && ctx.facts.call_numbers.count(call->llm_call_seq())) {
    otrace::Span::Link* link = span->add_links();
    link->set_trace_id(ctx.ids.trace_id);
    link->set_span_id(ctx.ids.Of("seq:" + std::to_string(call->llm_call_seq())));
    Attributes(link->mutable_attributes()).Str("trace.link", "requested_by");
  }
  AddRedactionFields(ctx, {t.call, t.result}, &a);
}

// How the run ended; any end but exit code 0 marks the root as an error, saying why.
void AddRunEndAttributes(const proto::RunEnd& r, otrace::Span* root, Attributes* a) {
  a->Str("trace.run.end", RunEndName(r.how()));
  if (r.how() == proto::RunEnd::EXITED) a->Int("trace.run.exit_code", r.exit_code());
  if (r.signal() != 0) a->Int("trace.run.signal", r.signal());
  if (!r.reason().empty()) a->Str("trace.run.end_reason", r.reason());
  bool failed = r.how() != proto::RunEnd::EXITED || r.exit_code() != 0;
  if (!failed) return;
  const char* type = r.how() == proto::RunEnd::EXITED      ? "nonzero_exit"
                     : r.how() == proto::RunEnd::SIGNALLED ? "signal"
                                                           : RunEndName(r.how());
  a->Str("error.type", type);
  root->mutable_status()->set_code(otrace::Status::STATUS_CODE_ERROR);
  std::string message =
      r.how() == proto::RunEnd::EXITED ? "agent exited with code " + std::to_string(r.exit_code())
      : r.how() == proto::RunEnd::SIGNALLED
          ? "agent died of signal " + std::to_string(r.signal())
          : std::string(RunEndName(r.how())) + (r.reason().empty() ? "" : ": " + r.reason());
  root->mutable_status()->set_message(message);
}

// What redaction did to the whole run (trace.redaction.applied, and its totals when it did).
void AddRedactionSummary(const RunData& run, Attributes* a) {
  a->Bool("trace.redaction.applied", run.redacted);
  if (!run.redacted) return;
  a->Int("trace.redaction.replacements", run.redaction.replacements());
  std::vector<std::string> rules;
  for (const auto& [rule, n] : run.redaction.RuleTotals()) rules.push_back(rule);
  a->StrList("trace.redaction.rules_matched", rules);
  std::vector<std::string> all = RedactedFieldLines(run.redaction);
  a->StrList("trace.redaction.fields", all);
  a->IntList(
      "trace.redaction.prompt_token_ids_removed",
      {run.redaction.prompt_tokens_removed.begin(), run.redaction.prompt_tokens_removed.end()});
  a->IntList(
      "trace.redaction.sampled_token_ids_removed",
      {run.redaction.sampled_tokens_removed.begin(), run.redaction.sampled_tokens_removed.end()});
  a->Str("trace.redaction.note", redact::kRedactedImportNote);
}

// The root's attributes: the agent, the run's totals and header, how it ended, its replay
// level and what redaction did.
void AddRootAttributes(const ExportContext& ctx, const UsageTotals& usage, otrace::Span* root) {
  const proto::RunHeader& h = ctx.run.header;
  Attributes a(root->mutable_attributes());
  a.Str("gen_ai.operation.name", "invoke_agent");
  a.Str("gen_ai.provider.name", ctx.Provider(WireFormat::kChatCompletions));
  if (!ctx.agent.empty()) a.Str("gen_ai.agent.name", ctx.agent);
  a.Str("gen_ai.conversation.id", ctx.run_id);
  if (!ctx.facts.request_model.empty()) a.Str("gen_ai.request.model", ctx.facts.request_model);
  a.Int("gen_ai.usage.input_tokens", usage.input);
  a.Int("gen_ai.usage.output_tokens", usage.output);
  if (h.argv_size() > 0) a.StrList("process.command_args", {h.argv().begin(), h.argv().end()});
  if (h.agent_pid() > 0) a.Int("process.pid", h.agent_pid());
  a.Str("trace.run.id", ctx.run_id);
  a.Str("trace.run.status", std::string(store::RunStatusName(ctx.run.summary.status)));
  if (!h.label().empty()) a.Str("trace.run.label", h.label());
  a.Str("trace.run.seed", std::to_string(h.run_seed()));
  a.Int("trace.run.events", static_cast<int64_t>(ctx.run.events.size()));
  a.Int("trace.run.model_calls", static_cast<int64_t>(ctx.facts.call_numbers.size()));
  if (!h.cwd().empty()) a.Str("trace.run.cwd", h.cwd());
  if (!h.endpoint().empty()) a.Str("trace.run.endpoint", h.endpoint());
  // By name: a protobuf map's iteration order differs from process to process.
  for (const auto& [k, v] :
       std::map<std::string, std::string>(h.attributes().begin(), h.attributes().end())) {
    a.Str("trace.run.attribute." + k, v);
  }
  a.Fields("trace.engine.", h.engine());
  a.Fields("trace.device.", h.device());
  a.Fields("trace.model.", h.model());
  if (ctx.facts.run_end) AddRunEndAttributes(ctx.facts.run_end->run_end(), root, &a);
  if (const ReplayLevels* replay = ctx.options.replay) {
    a.Str("trace.replay.level", replay->run_level);
    if (!replay->numerics.empty()) a.Str("trace.replay.numerics", replay->numerics);
    if (!replay->device.empty()) a.Str("trace.replay.device", replay->device);
  }
  AddRedactionSummary(ctx.run, &a);
}

// Events without a span of their own, on the root span, in order (agent output only with
// content).
void AddRootEvents(const ExportContext& ctx, otrace::Span* root) {
  const bool content = ctx.options.content;
  for (const proto::Event& e : ctx.run.events) {
    otrace::Span::Event* ev = nullptr;
    auto add = [&](const char* event_name) {
      ev = root->add_events();
      ev->set_time_unix_nano(static_cast<uint64_t>(e.wall_time_ns()));
      ev->set_name(event_name);
      return Attributes(ev->mutable_attributes());
    };
    if (e.has_context_chunk()) {
      const proto::ContextChunk& c = e.context_chunk();
      Attributes ea = add("trace.context_chunk");
      ea.Str("trace.context.source", c.source());
      if (!c.chunk_id().empty()) ea.Str("trace.context.chunk_id", c.chunk_id());
      ea.Double("trace.context.score", c.score());
      if (content) {
        ea.Str("trace.context.content", c.content());
        if (!c.query().empty()) ea.Str("trace.context.query", c.query());
      }
    } else if (e.has_template_var()) {
      const proto::TemplateVar& v = e.template_var();
      Attributes ea = add("trace.template_var");
      ea.Str("trace.template.var", v.name());
      if (!v.template_name().empty()) ea.Str("trace.template.name", v.template_name());
      if (content) ea.Str("trace.template.value", v.value());
    } else if (e.has_clock_read()) {
      const proto::ClockRead& c = e.clock_read();
      Attributes ea = add("trace.clock_read");
      ea.Str("trace.clock.name", c.clock());
      ea.Str("trace.clock.value_ns", std::to_string(c.value_ns()));
      if (!c.text().empty()) ea.Str("trace.clock.text", c.text());
    } else if (e.has_note()) {
      const proto::Note& n = e.note();
      Attributes ea = add("trace.note");
      ea.Str("trace.note.topic", n.topic());
      ea.Str("trace.note.text", n.text());
      if (!n.data_json().empty()) ea.Str("trace.note.data", n.data_json());
    } else if (e.has_output() && content) {
      Attributes ea = add("trace.output");
      ea.Str("trace.output.stream",
             e.output().stream() == proto::Output::STDERR ? "stderr" : "stdout");
      ea.Str("trace.output.data", e.output().data());
    }
    if (ev)
      Attributes(ev->mutable_attributes()).Int("trace.event.seq", static_cast<int64_t>(e.seq()));
  }
}

}  // namespace

// The resource (the agent), one scope, then the spans: the root, one per model call, one
// per tool call; the root's attributes once the calls' usage is summed.
Result<OtlpRequest> BuildOtlpRequest(const RunData& run, const OtlpOptions& options) {
  const std::string run_id = run.header.run_id().empty() ? run.summary.run_id : run.header.run_id();
  if (run_id.empty()) return InvalidArgument("run has no id: cannot derive an OTLP trace id");
  const ExportContext ctx(run, options, run_id);

  OtlpRequest request;
  otrace::ResourceSpans* rs = request.add_resource_spans();
  rs->set_schema_url(kSemconvSchemaUrl);
  AddResourceAttributes(run.header, ctx.agent, rs);
  otrace::ScopeSpans* ss = AddScope(rs);
  otrace::Span* root = AddRootSpan(ctx, ss);
  UsageTotals usage;
  for (const proto::Event& e : run.events) {
    if (e.has_llm_call()) AddModelCallSpan(ctx, e, ss, &usage);
  }
  for (const ToolSpanSource& t : PairToolEvents(run.events)) AddToolSpan(ctx, t, ss);
  AddRootAttributes(ctx, usage, root);
  AddRootEvents(ctx, root);
  return request;
}

std::vector<OtlpRequest> SplitOtlpRequest(const OtlpRequest& request, size_t max_spans) {
  std::vector<OtlpRequest> out;
  if (max_spans == 0) max_spans = 1;
  for (const auto& rs : request.resource_spans()) {
    for (const auto& ss : rs.scope_spans()) {
      for (int i = 0; i < ss.spans_size(); i += static_cast<int>(max_spans)) {
        OtlpRequest part;
        otrace::ResourceSpans* prs = part.add_resource_spans();
        *prs->mutable_resource() = rs.resource();
        prs->set_schema_url(rs.schema_url());
        otrace::ScopeSpans* pss = prs->add_scope_spans();
        *pss->mutable_scope() = ss.scope();
        pss->set_schema_url(ss.schema_url());
        int end = std::min(ss.spans_size(), i + static_cast<int>(max_spans));
        for (int k = i; k < end; ++k) *pss->add_spans() = ss.spans(k);
        out.push_back(std::move(part));
      }
    }
  }
  return out;
}

}  // namespace trace::exporters
