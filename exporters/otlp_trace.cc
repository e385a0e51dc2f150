#include "exporters/otlp_trace.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
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

Result<OtlpRequest> BuildOtlpRequest(const RunData& run, const OtlpOptions& options) {
  const proto::RunHeader& h = run.header;
  const std::string run_id = h.run_id().empty() ? run.summary.run_id : h.run_id();
  if (run_id.empty()) return InvalidArgument("run has no id: cannot derive an OTLP trace id");
  const auto trace_id_bytes = TraceIdOf(run_id);
  const SpanIds ids{run_id, Bytes(trace_id_bytes.data(), trace_id_bytes.size())};
  const auto redaction_lines = RedactionLinesByWhere(run);

  // Where the model calls went: the upstream for a proxied run, else our own server.
  auto upstream_it = h.attributes().find("upstream");
  const bool proxied = upstream_it != h.attributes().end() && !upstream_it->second.empty();
  Result<HttpUrl> server = ParseHttpUrl(proxied ? upstream_it->second : h.endpoint());

  OtlpRequest request;
  otrace::ResourceSpans* rs = request.add_resource_spans();
  rs->set_schema_url(kSemconvSchemaUrl);
  const std::string agent = AgentName(h);
  {
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
  otrace::ScopeSpans* ss = rs->add_scope_spans();
  ss->set_schema_url(kSemconvSchemaUrl);
  ss->mutable_scope()->set_name(kScopeName);
  ss->mutable_scope()->set_version(TRACE_VERSION);

  // ---- pass 1: what the spans need from across the run ----
  const proto::Event* run_end = nullptr;
  int64_t last_ns = h.start_time_ns();
  std::map<uint64_t, std::vector<const proto::ToolCall*>> model_tool_calls;  // by LlmCall seq
  std::map<uint64_t, int> call_numbers;                                      // seq -> 1-based
  int64_t input_tokens_total = 0, output_tokens_total = 0;
  std::string request_model;
  for (const proto::Event& e : run.events) {
    last_ns = std::max(last_ns, e.wall_time_ns());
    if (e.has_run_end()) run_end = &e;
    if (e.has_llm_call()) {
      call_numbers[e.seq()] = static_cast<int>(call_numbers.size()) + 1;
      last_ns = std::max(last_ns, e.llm_call().timings().end_ns());
      if (request_model.empty()) request_model = e.llm_call().model();
    }
    if (e.has_tool_call() && e.tool_call().llm_call_seq() != 0) {
      model_tool_calls[e.tool_call().llm_call_seq()].push_back(&e.tool_call());
    }
  }

  // ---- root span: the run ----
  otrace::Span* root = ss->add_spans();
  const std::string root_id = ids.Of("run");
  root->set_trace_id(ids.trace_id);
  root->set_span_id(root_id);
  root->set_name(agent.empty() ? "invoke_agent" : "invoke_agent " + agent);
  root->set_kind(otrace::Span::SPAN_KIND_INTERNAL);
  root->set_start_time_unix_nano(static_cast<uint64_t>(h.start_time_ns()));
  root->set_end_time_unix_nano(static_cast<uint64_t>(
      run_end ? std::max(run_end->wall_time_ns(), h.start_time_ns()) : last_ns));

  // ---- model calls ----
  for (const proto::Event& e : run.events) {
    if (!e.has_llm_call()) continue;
    const proto::LlmCall& c = e.llm_call();
    const WireFormat format = WireFormatOf(c.endpoint());
    const std::string operation = OperationName(format);
    otrace::Span* span = ss->add_spans();
    span->set_trace_id(ids.trace_id);
    span->set_span_id(ids.Of("seq:" + std::to_string(e.seq())));
    span->set_parent_span_id(root_id);
    span->set_name(c.model().empty() ? operation : operation + " " + c.model());
    span->set_kind(otrace::Span::SPAN_KIND_CLIENT);
    int64_t end = c.timings().end_ns() > 0 ? c.timings().end_ns() : e.wall_time_ns();
    int64_t start = c.timings().start_ns() > 0
                        ? c.timings().start_ns()
                        : end - static_cast<int64_t>(c.timings().total_ms() * 1e6);
    span->set_start_time_unix_nano(static_cast<uint64_t>(std::min(start, end)));
    span->set_end_time_unix_nano(static_cast<uint64_t>(end));

    Attributes a(span->mutable_attributes());
    a.Str("gen_ai.operation.name", operation);
    a.Str("gen_ai.provider.name",
          ProviderName(proxied && server.ok() ? server->host : "", format, proxied));
    if (!c.model().empty()) a.Str("gen_ai.request.model", c.model());
    a.Str("gen_ai.conversation.id", run_id);  // the run is the session that groups the calls
    const bool embeddings = format == WireFormat::kEmbeddings;
    const proto::SamplingParams& p = c.params();
    // An embeddings call samples nothing: no sampling parameters (its recorded params are
    // unset, not zero), but what the conventions give that operation.
    if (embeddings) {
      AddEmbeddingsAttributes(c, &a);
    } else {
      a.Double("gen_ai.request.temperature", Decimal(p.temperature()));
    }
    if (p.top_p() > 0) a.Double("gen_ai.request.top_p", Decimal(p.top_p()));
    if (p.top_k() > 0) a.Double("gen_ai.request.top_k", p.top_k());
    if (p.max_tokens() > 0) a.Int("gen_ai.request.max_tokens", p.max_tokens());
    if (p.has_seed()) a.Int("gen_ai.request.seed", static_cast<int64_t>(p.seed()));
    if (p.stop_size() > 0)
      a.StrList("gen_ai.request.stop_sequences", {p.stop().begin(), p.stop().end()});
    if (p.frequency_penalty() != 0)
      a.Double("gen_ai.request.frequency_penalty", Decimal(p.frequency_penalty()));
    if (p.presence_penalty() != 0)
      a.Double("gen_ai.request.presence_penalty", Decimal(p.presence_penalty()));
    if (p.n() > 1) a.Int("gen_ai.request.choice.count", p.n());
    if (c.stream()) a.Bool("gen_ai.request.stream", true);
    json response = json::parse(c.response_json(), nullptr, /*allow_exceptions=*/false);
    if (!c.request_id().empty()) a.Str("gen_ai.response.id", c.request_id());
    std::string response_model =
        response.is_object() && response.contains("model") && response["model"].is_string()
            ? response["model"].get<std::string>()
            : (!proxied ? h.model().model_name() : "");
    if (!response_model.empty()) a.Str("gen_ai.response.model", response_model);
    if (!c.finish_reason().empty() && !embeddings)
      a.StrList("gen_ai.response.finish_reasons", {c.finish_reason()});
    int64_t in = c.prompt_token_ids_size() > 0
                     ? c.prompt_token_ids_size()
                     : UsageValue(response, {"prompt_tokens", "input_tokens"});
    int64_t out = c.token_ids_size() > 0
                      ? c.token_ids_size()
                      : UsageValue(response, {"completion_tokens", "output_tokens"});
    if (in >= 0) {
      a.Int("gen_ai.usage.input_tokens", in);
      input_tokens_total += in;
    }
    if (out >= 0) {
      a.Int("gen_ai.usage.output_tokens", out);
      output_tokens_total += out;
    }
    if (c.prompt_tokens_reused() > 0) {
      a.Int("gen_ai.usage.cache_read.input_tokens", c.prompt_tokens_reused());
    }
    if (server.ok()) {
      a.Str("server.address", server->host);
      a.Int("server.port", server->port);
    }
    if (c.http_status() != 0) a.Int("http.response.status_code", c.http_status());
    if (c.http_status() != 0 && c.http_status() != 200) {
      a.Str("error.type", std::to_string(c.http_status()));
      span->mutable_status()->set_code(otrace::Status::STATUS_CODE_ERROR);
      span->mutable_status()->set_message(c.error().substr(0, 1024));
    }
    if (options.content && !embeddings) {
      GenAiContent content = ContentOf(c, model_tool_calls[e.seq()]);
      if (!content.system_instructions.is_null()) {
        a.Json("gen_ai.system_instructions", content.system_instructions);
      }
      a.Json("gen_ai.input.messages", content.input_messages);
      if (!content.output_messages.empty())
        a.Json("gen_ai.output.messages", content.output_messages);
      if (!content.tool_definitions.is_null()) {
        a.Json("gen_ai.tool.definitions", content.tool_definitions);
      }
      if (!c.constraint_json().empty()) a.Str("trace.constraint", c.constraint_json());
    }
    // Our own facts.
    a.Int("trace.event.seq", static_cast<int64_t>(e.seq()));
    a.Int("trace.call.number", call_numbers[e.seq()]);
    a.Str("trace.call.endpoint", c.endpoint());
    if (!c.numerics().empty()) a.Str("trace.numerics", c.numerics());
    a.Str("trace.seed_used", std::to_string(c.seed_used()));
    if (c.batch_size() > 0) a.Int("trace.batch_size", c.batch_size());
    a.Int("trace.sampled_tokens", c.token_ids_size());
    std::string digest = CombinedLogitsDigest(c);
    if (!digest.empty()) {
      a.Str("trace.logits_digest", digest);
      a.Int("trace.logits_digest_scheme", static_cast<int64_t>(c.logits_digest_scheme()));
    }
    if (c.num_layers() > 0) a.Int("trace.layer_digests.layers", c.num_layers());
    if (c.timings().queue_ms() > 0) a.Double("trace.timings.queue_ms", c.timings().queue_ms());
    if (c.timings().prefill_ms() > 0)
      a.Double("trace.timings.prefill_ms", c.timings().prefill_ms());
    if (c.timings().decode_ms() > 0) a.Double("trace.timings.decode_ms", c.timings().decode_ms());
    if (options.replay) {
      int number = call_numbers[e.seq()];
      auto lv = options.replay->call_levels.find(number);
      auto sk = options.replay->skipped.find(number);
      if (lv != options.replay->call_levels.end()) {
        a.Str("trace.replay.level", lv->second);
      } else if (sk != options.replay->skipped.end()) {
        a.Str("trace.replay.level", "skipped");
        a.Str("trace.replay.skipped_reason", sk->second);
      } else {
        a.Str("trace.replay.level", "not_replayed");
      }
    }
    auto lines = redaction_lines.find("seq " + std::to_string(e.seq()));
    if (lines != redaction_lines.end()) a.StrList("trace.redaction.fields", lines->second);
  }

  // ---- tool calls: one span per call id (a call and its result), in order of appearance ----
  std::vector<ToolSpanSource> tools;
  std::map<std::string, size_t> open_by_id;
  for (const proto::Event& e : run.events) {
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
  for (const ToolSpanSource& t : tools) {
    const proto::ToolCall* call = t.call ? &t.call->tool_call() : nullptr;
    const proto::ToolResult* result = t.result ? &t.result->tool_result() : nullptr;
    const proto::Event& first = t.call ? *t.call : *t.result;
    std::string name = call && !call->name().empty() ? call->name() : result ? result->name() : "";
    std::string call_id = call ? call->call_id() : result->call_id();
    otrace::Span* span = ss->add_spans();
    span->set_trace_id(ids.trace_id);
    span->set_span_id(ids.Of("tool:" + std::to_string(first.seq())));
    span->set_parent_span_id(root_id);
    span->set_name(name.empty() ? "execute_tool" : "execute_tool " + name);
    span->set_kind(otrace::Span::SPAN_KIND_INTERNAL);
    // From the call's time to the result's; a result reporting its duration starts there.
    int64_t end = t.result ? t.result->wall_time_ns() : first.wall_time_ns();
    int64_t start = t.call ? t.call->wall_time_ns() : end;
    if (result && result->duration_ms() > 0) {
      int64_t reported = end - static_cast<int64_t>(result->duration_ms() * 1e6);
      start = t.call ? std::max(start, reported) : reported;
    }
    span->set_start_time_unix_nano(static_cast<uint64_t>(std::min(start, end)));
    span->set_end_time_unix_nano(static_cast<uint64_t>(end));
    Attributes a(span->mutable_attributes());
    a.Str("gen_ai.operation.name", "execute_tool");
    a.Str("gen_ai.tool.name", name);
    if (!call_id.empty()) a.Str("gen_ai.tool.call.id", call_id);
    a.Str("gen_ai.tool.type", "function");
    if (options.content && call) a.Str("gen_ai.tool.call.arguments", call->arguments_json());
    if (options.content && result && !result->is_error()) {
      a.Str("gen_ai.tool.call.result", result->content());
    }
    if (result && result->is_error()) {
      a.Str("error.type", "tool_error");
      span->mutable_status()->set_code(otrace::Status::STATUS_CODE_ERROR);
      if (options.content) span->mutable_status()->set_message(result->content().substr(0, 1024));
    }
    if (call) {
      a.Str("trace.tool.source", call->source());
      a.Int("trace.tool_call.seq", static_cast<int64_t>(t.call->seq()));
    }
    if (t.result) a.Int("trace.tool_result.seq", static_cast<int64_t>(t.result->seq()));
    a.Bool("trace.tool.result_recorded", t.result != nullptr);
    if (call && call->llm_call_seq() != 0 && call_numbers.count(call->llm_call_seq())) {
      otrace::Span::Link* link = span->add_links();
      link->set_trace_id(ids.trace_id);
      link->set_span_id(ids.Of("seq:" + std::to_string(call->llm_call_seq())));
      Attributes(link->mutable_attributes()).Str("trace.link", "requested_by");
    }
    std::vector<std::string> lines;
    for (const proto::Event* src : {t.call, t.result}) {
      if (!src) continue;
      auto it = redaction_lines.find("seq " + std::to_string(src->seq()));
      if (it != redaction_lines.end())
        lines.insert(lines.end(), it->second.begin(), it->second.end());
    }
    if (!lines.empty()) a.StrList("trace.redaction.fields", lines);
  }

  // ---- the root's attributes and events ----
  Attributes a(root->mutable_attributes());
  a.Str("gen_ai.operation.name", "invoke_agent");
  a.Str("gen_ai.provider.name", ProviderName(proxied && server.ok() ? server->host : "",
                                             WireFormat::kChatCompletions, proxied));
  if (!agent.empty()) a.Str("gen_ai.agent.name", agent);
  a.Str("gen_ai.conversation.id", run_id);
  if (!request_model.empty()) a.Str("gen_ai.request.model", request_model);
  a.Int("gen_ai.usage.input_tokens", input_tokens_total);
  a.Int("gen_ai.usage.output_tokens", output_tokens_total);
  if (h.argv_size() > 0) a.StrList("process.command_args", {h.argv().begin(), h.argv().end()});
  if (h.agent_pid() > 0) a.Int("process.pid", h.agent_pid());
  a.Str("trace.run.id", run_id);
  a.Str("trace.run.status", std::string(store::RunStatusName(run.summary.status)));
  if (!h.label().empty()) a.Str("trace.run.label", h.label());
  a.Str("trace.run.seed", std::to_string(h.run_seed()));
  a.Int("trace.run.events", static_cast<int64_t>(run.events.size()));
  a.Int("trace.run.model_calls", static_cast<int64_t>(call_numbers.size()));
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
  if (run_end) {
    const proto::RunEnd& r = run_end->run_end();
    a.Str("trace.run.end", RunEndName(r.how()));
    if (r.how() == proto::RunEnd::EXITED) a.Int("trace.run.exit_code", r.exit_code());
    if (r.signal() != 0) a.Int("trace.run.signal", r.signal());
    if (!r.reason().empty()) a.Str("trace.run.end_reason", r.reason());
    bool failed = r.how() != proto::RunEnd::EXITED || r.exit_code() != 0;
    if (failed) {
      const char* type = r.how() == proto::RunEnd::EXITED      ? "nonzero_exit"
                         : r.how() == proto::RunEnd::SIGNALLED ? "signal"
                                                               : RunEndName(r.how());
      a.Str("error.type", type);
      root->mutable_status()->set_code(otrace::Status::STATUS_CODE_ERROR);
      std::string message =
          r.how() == proto::RunEnd::EXITED
              ? "agent exited with code " + std::to_string(r.exit_code())
          : r.how() == proto::RunEnd::SIGNALLED
              ? "agent died of signal " + std::to_string(r.signal())
              : std::string(RunEndName(r.how())) + (r.reason().empty() ? "" : ": " + r.reason());
      root->mutable_status()->set_message(message);
    }
  }
  if (options.replay) {
    a.Str("trace.replay.level", options.replay->run_level);
    if (!options.replay->numerics.empty()) a.Str("trace.replay.numerics", options.replay->numerics);
    if (!options.replay->device.empty()) a.Str("trace.replay.device", options.replay->device);
  }
  a.Bool("trace.redaction.applied", run.redacted);
  if (run.redacted) {
    a.Int("trace.redaction.replacements", run.redaction.replacements());
    std::vector<std::string> rules;
    for (const auto& [rule, n] : run.redaction.RuleTotals()) rules.push_back(rule);
    a.StrList("trace.redaction.rules_matched", rules);
    std::vector<std::string> all = RedactedFieldLines(run.redaction);
    a.StrList("trace.redaction.fields", all);
    a.IntList(
        "trace.redaction.prompt_token_ids_removed",
        {run.redaction.prompt_tokens_removed.begin(), run.redaction.prompt_tokens_removed.end()});
    a.IntList(
        "trace.redaction.sampled_token_ids_removed",
        {run.redaction.sampled_tokens_removed.begin(), run.redaction.sampled_tokens_removed.end()});
    a.Str("trace.redaction.note", redact::kRedactedImportNote);
  }
  // Events without a span of their own, on the root span, in order.
  for (const proto::Event& e : run.events) {
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
      if (options.content) {
        ea.Str("trace.context.content", c.content());
        if (!c.query().empty()) ea.Str("trace.context.query", c.query());
      }
    } else if (e.has_template_var()) {
      const proto::TemplateVar& v = e.template_var();
      Attributes ea = add("trace.template_var");
      ea.Str("trace.template.var", v.name());
      if (!v.template_name().empty()) ea.Str("trace.template.name", v.template_name());
      if (options.content) ea.Str("trace.template.value", v.value());
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
    } else if (e.has_output() && options.content) {
      Attributes ea = add("trace.output");
      ea.Str("trace.output.stream",
             e.output().stream() == proto::Output::STDERR ? "stderr" : "stdout");
      ea.Str("trace.output.data", e.output().data());
    }
    if (ev)
      Attributes(ev->mutable_attributes()).Int("trace.event.seq", static_cast<int64_t>(e.seq()));
  }
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
