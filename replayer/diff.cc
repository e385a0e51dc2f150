#include "replayer/diff.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/escape.h"
#include "engine/model_files.h"
#include "engine/tokenizer/tokenizer.h"
#include "replayer/report.h"
#include "replayer/verifier.h"

namespace trace::replayer {
namespace {

// Recorded JSON that came from outside (an upstream's answer is recorded as it arrived and
// may nest arbitrarily deep): values nested deeper than 256 levels are dropped while
// parsing (iteratively), so the recursive walks and dumps below cannot overflow the stack.
nlohmann::json ParseRecorded(const std::string& text) {
  return nlohmann::json::parse(
      text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) { return depth < 256; },
      /*allow_exceptions=*/false);
}

using proto::Event;

std::string KindName(const Event& e) {
  switch (e.kind_case()) {
    case Event::kLlmCall:
      return "llm_call";
    case Event::kToolCall:
      return "tool_call";
    case Event::kToolResult:
      return "tool_result";
    case Event::kContextChunk:
      return "context_chunk";
    case Event::kTemplateVar:
      return "template_var";
    case Event::kClockRead:
      return "clock_read";
    case Event::kOutput:
      return "output";
    case Event::kNote:
      return "note";
    case Event::kRunEnd:
      return "run_end";
    case Event::KIND_NOT_SET:
      break;
  }
  return "empty";
}

// Events that carry what the run depended on or did; agent output and notes do not align.
bool Aligned(const Event& e) {
  return e.kind_case() != Event::kOutput && e.kind_case() != Event::kNote &&
         e.kind_case() != Event::KIND_NOT_SET;
}

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

bool SamePrompt(const proto::LlmCall& a, const proto::LlmCall& b) {
  return std::equal(a.prompt_token_ids().begin(), a.prompt_token_ids().end(),
                    b.prompt_token_ids().begin(), b.prompt_token_ids().end());
}

// Calls answered by an upstream model carry no token ids: they are compared by what was
// exchanged, the request body and the answer. Ids an upstream assigns (response, item and
// tool-call ids) differ from run to run and come back in later requests
// (previous_response_id, tool_call_id): each is replaced by its place of first appearance in
// its run ("<id 3>"), so two runs that asked the same things in the same order compare
// equal.
bool ExchangeOnly(const proto::LlmCall& c) {
  return c.prompt_token_ids_size() == 0 && c.token_ids_size() == 0;
}

class Exchanges {
 public:
  void AddRun(const std::vector<Event>& events) {
    std::map<std::string, std::string> ids;
    for (const Event& e : events) {
      if (!e.has_llm_call() || !ExchangeOnly(e.llm_call())) continue;
      const proto::LlmCall& c = e.llm_call();
      nlohmann::json req = ParseRecorded(c.request_json());
      requests_[&c] = req.is_discarded() ? c.request_json() : Replace(req, ids).dump(2);
      nlohmann::json res = ParseRecorded(c.response_json());
      if (!res.is_discarded()) Collect(res, &ids);
    }
  }
  // The request with upstream ids replaced; empty for calls the engine served.
  const std::string& Request(const proto::LlmCall& c) const {
    static const std::string kNone;
    auto it = requests_.find(&c);
    return it == requests_.end() ? kNone : it->second;
  }

 private:
  static void Collect(const nlohmann::json& j, std::map<std::string, std::string>* ids) {
    if (j.is_array()) {
      for (const auto& v : j) Collect(v, ids);
    } else if (j.is_object()) {
      for (const auto& [k, v] : j.items()) {
        if (v.is_string() && (k == "id" || k == "call_id") && !ids->count(v)) {
          (*ids)[v.get<std::string>()] = "<id " + std::to_string(ids->size() + 1) + ">";
        } else {
          Collect(v, ids);
        }
      }
    }
  }
  static nlohmann::json Replace(nlohmann::json j, const std::map<std::string, std::string>& ids) {
    if (j.is_string()) {
      auto it = ids.find(j.get<std::string>());
      return it == ids.end() ? j : nlohmann::json(it->second);
    }
    if (j.is_array() || j.is_object()) {
      for (auto& v : j) v = Replace(std::move(v), ids);
    }
    return j;
  }

  std::map<const proto::LlmCall*, std::string> requests_;
};

// What a proxied call answered, to compare: the output text, or for an embeddings call
// (which has none) its vectors, the response's `data` (upstream ids and usage aside).
std::string AnswerText(const proto::LlmCall& c) {
  if (c.api() != "openai.embeddings") return c.output_text();
  nlohmann::json r = ParseRecorded(c.response_json());
  if (r.is_object() && r.contains("data")) return r["data"].dump();
  return c.response_json();
}

bool SameOutput(const proto::LlmCall& a, const proto::LlmCall& b) {
  return std::equal(a.token_ids().begin(), a.token_ids().end(), b.token_ids().begin(),
                    b.token_ids().end()) &&
         std::equal(a.logits_digests().begin(), a.logits_digests().end(),
                    b.logits_digests().begin(), b.logits_digests().end()) &&
         (!ExchangeOnly(a) || !ExchangeOnly(b) ||
          (AnswerText(a) == AnswerText(b) && a.finish_reason() == b.finish_reason()));
}

bool SameRequest(const proto::LlmCall& a, const proto::LlmCall& b, const Exchanges& ex) {
  if (ExchangeOnly(a) && ExchangeOnly(b)) return ex.Request(a) == ex.Request(b);
  return SamePrompt(a, b);
}

// The "model" field an upstream answered with ("gpt-4o-2024-08-06"); empty if none.
std::string ResponseModel(const proto::LlmCall& c) {
  nlohmann::json r = ParseRecorded(c.response_json());
  return r.is_object() && r.contains("model") && r["model"].is_string()
             ? r["model"].get<std::string>()
             : "";
}

std::vector<FieldDifference> ParamDifferences(const proto::LlmCall& a, const proto::LlmCall& b) {
  std::vector<FieldDifference> out;
  auto cmp = [&](const std::string& field, const std::string& va, const std::string& vb) {
    if (va != vb) out.push_back({field, va, vb});
  };
  const auto& pa = a.params();
  const auto& pb = b.params();
  cmp("temperature", FormatFloat(pa.temperature()), FormatFloat(pb.temperature()));
  cmp("top_p", FormatFloat(pa.top_p()), FormatFloat(pb.top_p()));
  cmp("top_k", std::to_string(pa.top_k()), std::to_string(pb.top_k()));
  cmp("max_tokens", std::to_string(pa.max_tokens()), std::to_string(pb.max_tokens()));
  cmp("stop", Join(pa.stop()), Join(pb.stop()));
  cmp("frequency_penalty", FormatFloat(pa.frequency_penalty()),
      FormatFloat(pb.frequency_penalty()));
  cmp("presence_penalty", FormatFloat(pa.presence_penalty()), FormatFloat(pb.presence_penalty()));
  auto bias_text = [](const proto::SamplingParams& p) {
    std::string out;
    for (const proto::LogitBias& b : p.logit_bias()) {
      out += (out.empty() ? "" : ", ") + std::to_string(b.id()) + ": " + FormatFloat(b.bias());
    }
    return out.empty() ? std::string("(none)") : "{" + out + "}";
  };
  cmp("logit_bias", bias_text(pa), bias_text(pb));
  // Temperature 0 on both sides is greedy sampling (argmax), which draws nothing: the seed
  // cannot change a token, so a different one is no difference (docs/numerics.md).
  const bool greedy = pa.temperature() == 0.0f && pb.temperature() == 0.0f;
  if (!greedy) {
    cmp("seed (request)", pa.has_seed() ? std::to_string(pa.seed()) : "(none)",
        pb.has_seed() ? std::to_string(pb.seed()) : "(none)");
    cmp("seed (used)", std::to_string(a.seed_used()), std::to_string(b.seed_used()));
  }
  cmp("constraint", a.constraint_json(), b.constraint_json());
  return out;
}

// Semantic equality: what the run depended on or produced, not when or how fast.
bool SameEvent(const Event& a, const Event& b, const Exchanges& ex) {
  if (a.kind_case() != b.kind_case()) return false;
  switch (a.kind_case()) {
    case Event::kLlmCall:
      return SameRequest(a.llm_call(), b.llm_call(), ex) &&
             SameOutput(a.llm_call(), b.llm_call()) &&
             ParamDifferences(a.llm_call(), b.llm_call()).empty();
    case Event::kToolCall:
      return a.tool_call().name() == b.tool_call().name() &&
             a.tool_call().arguments_json() == b.tool_call().arguments_json();
    case Event::kToolResult:
      return a.tool_result().name() == b.tool_result().name() &&
             a.tool_result().content() == b.tool_result().content() &&
             a.tool_result().is_error() == b.tool_result().is_error();
    case Event::kContextChunk:
      return a.context_chunk().source() == b.context_chunk().source() &&
             a.context_chunk().chunk_id() == b.context_chunk().chunk_id() &&
             a.context_chunk().content() == b.context_chunk().content() &&
             a.context_chunk().query() == b.context_chunk().query();
    case Event::kTemplateVar:
      return a.template_var().name() == b.template_var().name() &&
             a.template_var().value() == b.template_var().value() &&
             a.template_var().template_name() == b.template_var().template_name();
    case Event::kClockRead:
      return a.clock_read().clock() == b.clock_read().clock() &&
             a.clock_read().value_ns() == b.clock_read().value_ns() &&
             a.clock_read().text() == b.clock_read().text();
    case Event::kRunEnd:
      return a.run_end().how() == b.run_end().how() &&
             a.run_end().exit_code() == b.run_end().exit_code() &&
             a.run_end().signal() == b.run_end().signal();
    default:
      return true;
  }
}

// Describe's pieces: every recorded string goes into the one-line description escaped
// (base/escape.h), so the description is safe on a terminal wherever it is shown (trace
// diff's text, its sources of variation, the HTML page, the JSON): a tool that returned
// "\x1b]0;title\x07" must not retitle the user's terminal. Values the reader must read
// exactly (a tool's result, a chunk, a variable, an answer) are quoted, names and JSON not.
constexpr size_t kDescribedLimit = 60;
std::string ValueText(const std::string& value) {
  return QuoteForDisplay(value, kDescribedLimit);
}
std::string NameText(const std::string& name) {
  return EscapeForDisplay(name, kDescribedLimit);
}
std::string FieldText(const std::string& value) {
  return EscapeForDisplay(value);
}

std::string Describe(const Event& a, const Event& b, const Exchanges& ex) {
  std::ostringstream o;
  switch (a.kind_case()) {
    case Event::kLlmCall: {
      const auto& x = a.llm_call();
      const auto& y = b.llm_call();
      auto params = ParamDifferences(x, y);
      if (!params.empty()) {
        o << "params differ: " << params[0].field << " " << FieldText(params[0].recorded) << " vs "
          << FieldText(params[0].current);
      } else if (ExchangeOnly(x) && ExchangeOnly(y)) {
        o << (SameRequest(x, y, ex) ? "same request to the upstream, the answers differ: "
                                    : "the requests differ; answers ")
          << ValueText(AnswerText(x)) << " vs " << ValueText(AnswerText(y));
      } else if (!SamePrompt(x, y)) {
        o << "prompts differ (" << x.prompt_token_ids_size() << " vs " << y.prompt_token_ids_size()
          << " tokens)";
      } else {
        o << "same prompt and params, outputs differ";
      }
      break;
    }
    case Event::kToolCall:
      o << "tool call " << NameText(a.tool_call().name()) << " "
        << NameText(a.tool_call().arguments_json()) << " vs " << NameText(b.tool_call().name())
        << " " << NameText(b.tool_call().arguments_json());
      break;
    case Event::kToolResult:
      o << "tool " << NameText(a.tool_result().name()) << " returned "
        << ValueText(a.tool_result().content()) << " vs " << ValueText(b.tool_result().content());
      break;
    case Event::kContextChunk:
      o << "chunk " << NameText(a.context_chunk().source()) << "#"
        << NameText(a.context_chunk().chunk_id()) << " " << ValueText(a.context_chunk().content())
        << " vs " << NameText(b.context_chunk().source()) << "#"
        << NameText(b.context_chunk().chunk_id()) << " " << ValueText(b.context_chunk().content());
      break;
    case Event::kTemplateVar:
      o << "template variable " << NameText(a.template_var().name()) << " = "
        << ValueText(a.template_var().value()) << " vs " << NameText(b.template_var().name())
        << " = " << ValueText(b.template_var().value());
      break;
    case Event::kClockRead:
      o << "clock " << NameText(a.clock_read().clock()) << " read "
        << (a.clock_read().text().empty() ? std::to_string(a.clock_read().value_ns())
                                          : NameText(a.clock_read().text()))
        << " vs "
        << (b.clock_read().text().empty() ? std::to_string(b.clock_read().value_ns())
                                          : NameText(b.clock_read().text()));
      break;
    case Event::kRunEnd:
      o << "run ended " << a.run_end().how() << " exit " << a.run_end().exit_code() << " vs "
        << b.run_end().how() << " exit " << b.run_end().exit_code();
      break;
    default:
      o << "differs";
  }
  return o.str();
}

std::string RenderedPrompt(const proto::LlmCall& c, const engine::Tokenizer* tokenizer) {
  if (!c.rendered_prompt().empty() || tokenizer == nullptr) return c.rendered_prompt();
  std::vector<int32_t> ids(c.prompt_token_ids().begin(), c.prompt_token_ids().end());
  return tokenizer->Decode(ids);
}

CallDifference DiffCall(int number, const Event& ea, const Event& eb,
                        const engine::Tokenizer* tokenizer, const Exchanges& ex) {
  const auto& a = ea.llm_call();
  const auto& b = eb.llm_call();
  CallDifference d;
  d.call = number;
  d.seq_a = ea.seq();
  d.seq_b = eb.seq();
  d.params = ParamDifferences(a, b);
  if (ExchangeOnly(a) && ExchangeOnly(b)) {
    if (!SameRequest(a, b, ex)) d.request_diff = LineDiff(ex.Request(a), ex.Request(b));
    if (AnswerText(a) != AnswerText(b) || a.finish_reason() != b.finish_reason()) {
      d.answers_differ = true;
      d.output_text_a = AnswerText(a);
      d.output_text_b = AnswerText(b);
    }
    d.response_model_a = ResponseModel(a);
    d.response_model_b = ResponseModel(b);
    return d;
  }
  int np = std::min(a.prompt_token_ids_size(), b.prompt_token_ids_size());
  for (int i = 0; i <= np; ++i) {
    bool end_a = i == a.prompt_token_ids_size(), end_b = i == b.prompt_token_ids_size();
    if (end_a && end_b) break;
    if (end_a || end_b || a.prompt_token_ids(i) != b.prompt_token_ids(i)) {
      d.first_prompt_token = i;
      d.prompt_token_a = end_a ? -1 : a.prompt_token_ids(i);
      d.prompt_token_b = end_b ? -1 : b.prompt_token_ids(i);
      d.prompt_text_diff = LineDiff(RenderedPrompt(a, tokenizer), RenderedPrompt(b, tokenizer));
      break;
    }
  }
  int nt = std::min(a.token_ids_size(), b.token_ids_size());
  bool digests = a.logits_digests_size() == a.token_ids_size() &&
                 b.logits_digests_size() == b.token_ids_size();
  for (int i = 0; i < nt && digests; ++i) {
    if (a.logits_digests(i) != b.logits_digests(i)) {
      d.first_logits_difference = i;
      break;
    }
  }
  for (int i = 0; i <= nt; ++i) {
    bool end_a = i == a.token_ids_size(), end_b = i == b.token_ids_size();
    if (end_a && end_b) break;
    if (end_a || end_b || a.token_ids(i) != b.token_ids(i)) {
      d.first_output_token = i;
      d.output_token_a = end_a ? -1 : a.token_ids(i);
      d.output_token_b = end_b ? -1 : b.token_ids(i);
      d.output_text_a = TokenText(tokenizer, d.output_token_a);
      d.output_text_b = TokenText(tokenizer, d.output_token_b);
      break;
    }
  }
  return d;
}

void CompareField(const std::string& field, const std::string& a, const std::string& b,
                  std::vector<FieldDifference>* out) {
  if (a != b) out->push_back({field, a, b});
}

// A pair of aligned events of one kind, either side possibly missing.
struct Pair {
  const Event* a = nullptr;
  const Event* b = nullptr;
  uint64_t order() const { return a ? a->seq() : b->seq(); }
};

std::map<Event::KindCase, std::vector<Pair>> AlignByKind(const std::vector<Event>& ea,
                                                         const std::vector<Event>& eb) {
  std::map<Event::KindCase, std::vector<const Event*>> ka, kb;
  for (const auto& e : ea) {
    if (Aligned(e)) ka[e.kind_case()].push_back(&e);
  }
  for (const auto& e : eb) {
    if (Aligned(e)) kb[e.kind_case()].push_back(&e);
  }
  std::map<Event::KindCase, std::vector<Pair>> out;
  for (auto* side : {&ka, &kb}) {
    for (auto& [kind, unused] : *side) out[kind];
  }
  for (auto& [kind, pairs] : out) {
    const auto& va = ka[kind];
    const auto& vb = kb[kind];
    for (size_t i = 0; i < std::max(va.size(), vb.size()); ++i) {
      pairs.push_back({i < va.size() ? va[i] : nullptr, i < vb.size() ? vb[i] : nullptr});
    }
  }
  return out;
}

EventDifference MakeDifference(const Pair& p, const Exchanges& ex) {
  EventDifference d;
  d.kind = KindName(p.a ? *p.a : *p.b);
  d.seq_a = p.a ? p.a->seq() : 0;
  d.seq_b = p.b ? p.b->seq() : 0;
  if (p.a && p.b) {
    d.description = Describe(*p.a, *p.b, ex);
  } else {
    d.description = std::string("only run ") + (p.a ? "A" : "B") + " has this " + d.kind;
  }
  return d;
}

}  // namespace

const char* SourceName(Source source) {
  switch (source) {
    case Source::kSampling:
      return "sampling";
    case Source::kKernels:
      return "kernels and stack";
    case Source::kPrompt:
      return "prompt interpolation";
    case Source::kContext:
      return "context";
    case Source::kTools:
      return "tools";
    case Source::kTime:
      return "time";
    case Source::kModel:
      return "model version";
    case Source::kHistory:
      return "history";
  }
  return "unknown";
}

bool RunDiff::identical() const {
  return fingerprint_differences.empty() && model_differences.empty() &&
         !first_difference.has_value() &&
         std::none_of(sources.begin(), sources.end(),
                      [](const SourceVerdict& v) { return v.changed; });
}

Result<RunDiff> DiffLoadedRuns(const proto::RunHeader& ha, const std::vector<Event>& ea,
                               const proto::RunHeader& hb, const std::vector<Event>& eb,
                               const engine::Tokenizer* tokenizer, const DiffOptions& options) {
  RunDiff diff;
  diff.link = LinkOf(ha, hb);
  diff.run_a = ha.run_id();
  diff.run_b = hb.run_id();

  // Fingerprints: the engine and device (kernels and stack), the model, the header.
  const auto& ga = ha.engine();
  const auto& gb = hb.engine();
  auto& fp = diff.fingerprint_differences;
  CompareField("engine.version", ga.version(), gb.version(), &fp);
  CompareField("engine.git_revision", ga.git_revision(), gb.git_revision(), &fp);
  CompareField("engine.compiler", ga.compiler(), gb.compiler(), &fp);
  CompareField("engine.build_type", ga.build_type(), gb.build_type(), &fp);
  CompareField("engine.numerics", ga.numerics(), gb.numerics(), &fp);
  CompareField("engine.kernel_impl", ga.kernel_impl(), gb.kernel_impl(), &fp);
  const auto& da = ha.device();
  const auto& db = hb.device();
  CompareField("device.device", da.device(), db.device(), &fp);
  CompareField("device.description", da.description(), db.description(), &fp);
  CompareField("device.cpu_model", da.cpu_model(), db.cpu_model(), &fp);
  CompareField("device.os", da.os(), db.os(), &fp);
  CompareField("device.gpu_name", da.gpu_name(), db.gpu_name(), &fp);
  CompareField("device.gpu_driver_version", da.gpu_driver_version(), db.gpu_driver_version(), &fp);
  CompareField("device.cuda_runtime_version", da.cuda_runtime_version(), db.cuda_runtime_version(),
               &fp);
  CompareField("device.cublas_version", da.cublas_version(), db.cublas_version(), &fp);
  const auto& ma = ha.model();
  const auto& mb = hb.model();
  auto& md = diff.model_differences;
  CompareField("model.weights_sha256", ma.weights_sha256(), mb.weights_sha256(), &md);
  CompareField("model.config_sha256", ma.config_sha256(), mb.config_sha256(), &md);
  CompareField("model.tokenizer_sha256", ma.tokenizer_sha256(), mb.tokenizer_sha256(), &md);
  CompareField("model.chat_template_sha256", ma.chat_template_sha256(), mb.chat_template_sha256(),
               &md);
  CompareField("model.architecture", ma.architecture(), mb.architecture(), &md);
  CompareField("model.dtype", ma.dtype(), mb.dtype(), &md);
  auto& hd = diff.header_differences;
  CompareField("argv", Join(ha.argv()), Join(hb.argv()), &hd);
  CompareField("cwd", ha.cwd(), hb.cwd(), &hd);
  CompareField("run_seed", std::to_string(ha.run_seed()), std::to_string(hb.run_seed()), &hd);
  {
    std::map<std::string, std::string> env_a(ha.env().begin(), ha.env().end());
    std::map<std::string, std::string> env_b(hb.env().begin(), hb.env().end());
    for (const auto& [k, v] : env_a) {
      auto it = env_b.find(k);
      CompareField("env." + k, v, it == env_b.end() ? "(unset)" : it->second, &hd);
    }
    for (const auto& [k, v] : env_b) {
      if (!env_a.count(k)) CompareField("env." + k, "(unset)", v, &hd);
    }
  }

  Exchanges ex;
  ex.AddRun(ea);
  ex.AddRun(eb);

  // The first differing event, walking both streams in order.
  std::vector<const Event*> sa, sb;
  for (const auto& e : ea) {
    if (Aligned(e)) sa.push_back(&e);
  }
  for (const auto& e : eb) {
    if (Aligned(e)) sb.push_back(&e);
  }
  for (size_t i = 0; i < std::max(sa.size(), sb.size()); ++i) {
    const Event* a = i < sa.size() ? sa[i] : nullptr;
    const Event* b = i < sb.size() ? sb[i] : nullptr;
    if (a && b && SameEvent(*a, *b, ex)) continue;
    EventDifference d;
    d.seq_a = a ? a->seq() : 0;
    d.seq_b = b ? b->seq() : 0;
    if (a && b && a->kind_case() == b->kind_case()) {
      d.kind = KindName(*a);
      d.description = Describe(*a, *b, ex);
    } else if (a && b) {
      d.kind = KindName(*a) + "/" + KindName(*b);
      d.description = "run A has a " + KindName(*a) + " where run B has a " + KindName(*b);
    } else {
      d.kind = KindName(a ? *a : *b);
      d.description = std::string("run ") + (a ? "B" : "A") + " ends here; run " + (a ? "A" : "B") +
                      " goes on with a " + d.kind;
    }
    diff.first_difference = d;
    break;
  }

  // Per-kind alignment, and the differences of each kind.
  auto pairs = AlignByKind(ea, eb);
  std::vector<SourceVerdict> sources(kSourceCount);
  for (int s = 0; s < kSourceCount; ++s) sources[s].source = static_cast<Source>(s);
  auto mark = [&](Source s, const std::string& evidence) {
    auto& v = sources[static_cast<int>(s)];
    if (!v.changed) {
      v.changed = true;
      v.evidence = evidence;
    }
  };
  if (!diff.model_differences.empty()) {
    mark(Source::kModel, diff.model_differences[0].field + " differs");
  }
  if (!diff.fingerprint_differences.empty()) {
    const auto& f = diff.fingerprint_differences[0];
    mark(Source::kKernels, f.field + " " + FieldText(f.recorded) + " vs " + FieldText(f.current));
  }

  // The seq (in run A's numbering) of the earliest difference of each kind of effect:
  // anything at all, and a model output (tokens or tool calls) in particular.
  uint64_t earliest_any = UINT64_MAX;
  uint64_t earliest_output = UINT64_MAX;
  auto note_any = [&](uint64_t seq) { earliest_any = std::min(earliest_any, seq); };

  // Model calls first: they establish where outputs start to differ.
  int number = 0;
  for (const Pair& p : pairs[Event::kLlmCall]) {
    ++number;
    if (p.a && p.b && SameEvent(*p.a, *p.b, ex)) continue;
    if (!p.a || !p.b) {
      diff.other_differences.push_back(MakeDifference(p, ex));
      note_any(p.order());
      earliest_output = std::min(earliest_output, p.order());
      continue;
    }
    note_any(p.order());
    CallDifference cd = DiffCall(number, *p.a, *p.b, tokenizer, ex);
    const std::string where =
        "call " + std::to_string(number) + " (seq " + std::to_string(p.a->seq()) + ")";
    if (!cd.params.empty()) {
      mark(Source::kSampling, where + ": " + cd.params[0].field + " " +
                                  FieldText(cd.params[0].recorded) + " vs " +
                                  FieldText(cd.params[0].current));
    }
    if (cd.first_prompt_token < 0 && cd.params.empty() && diff.model_differences.empty() &&
        (cd.first_output_token >= 0 || cd.first_logits_difference >= 0)) {
      // Same model, prompt, params and seed, different logits: the stack did it.
      int step =
          cd.first_logits_difference >= 0 ? cd.first_logits_difference : cd.first_output_token;
      mark(Source::kKernels, where + ": same prompt, params and seed; logits differ from step " +
                                 std::to_string(step));
    }
    if (cd.request_diff.empty() && cd.params.empty() && cd.answers_differ) {
      // An upstream answered the same request differently: a hosted model's version,
      // sampling and serving stack cannot be told apart from outside, save its name.
      if (cd.response_model_a != cd.response_model_b) {
        mark(Source::kModel, where + ": the upstream answered as " + NameText(cd.response_model_a) +
                                 " vs " + NameText(cd.response_model_b));
      } else {
        mark(Source::kSampling, where +
                                    ": same request to the upstream, different answer (a hosted "
                                    "model: its sampling, version and stack cannot be told "
                                    "apart)");
      }
    }
    if (cd.first_output_token >= 0 || cd.answers_differ) {
      earliest_output = std::min(earliest_output, p.order());
    }
    diff.calls.push_back(std::move(cd));
  }

  auto collect = [&](Event::KindCase kind, std::vector<EventDifference>* out) {
    std::vector<const Pair*> differing;
    for (const Pair& p : pairs[kind]) {
      if (p.a && p.b && SameEvent(*p.a, *p.b, ex)) continue;
      out->push_back(MakeDifference(p, ex));
      differing.push_back(&p);
    }
    return differing;
  };
  // Tool calls the model made (or the agent reported) by call id, to tell a tool that
  // answered differently from a tool that was asked something else.
  std::map<std::string, const Event*> calls_a, calls_b;
  for (const auto& e : ea) {
    if (e.has_tool_call()) calls_a[e.tool_call().call_id()] = &e;
  }
  for (const auto& e : eb) {
    if (e.has_tool_call()) calls_b[e.tool_call().call_id()] = &e;
  }
  for (const Pair* p : collect(Event::kToolCall, &diff.other_differences)) {
    note_any(p->order());
    earliest_output = std::min(earliest_output, p->order());
  }
  for (const Pair* p : collect(Event::kToolResult, &diff.tool_differences)) {
    note_any(p->order());
    if (!p->a || !p->b) continue;
    auto ca = calls_a.find(p->a->tool_result().call_id());
    auto cb = calls_b.find(p->b->tool_result().call_id());
    bool same_request;
    if (ca != calls_a.end() && cb != calls_b.end()) {
      same_request = SameEvent(*ca->second, *cb->second, ex);
    } else {
      same_request = earliest_output > p->order();
    }
    if (same_request) {
      mark(Source::kTools,
           "seq " + std::to_string(p->a->seq()) + ": " + Describe(*p->a, *p->b, ex));
    }
  }
  for (const Pair* p : collect(Event::kContextChunk, &diff.context_differences)) {
    note_any(p->order());
    if (!p->a || !p->b) continue;
    bool same_query = p->a->context_chunk().query() == p->b->context_chunk().query() &&
                      (!p->a->context_chunk().query().empty() || earliest_output > p->order());
    if (same_query) {
      mark(Source::kContext,
           "seq " + std::to_string(p->a->seq()) + ": " + Describe(*p->a, *p->b, ex));
    }
  }
  for (const Pair* p : collect(Event::kTemplateVar, &diff.template_differences)) {
    note_any(p->order());
    if (p->a && p->b) {
      mark(Source::kPrompt,
           "seq " + std::to_string(p->a->seq()) + ": " + Describe(*p->a, *p->b, ex));
    }
  }
  for (const Pair* p : collect(Event::kClockRead, &diff.clock_differences)) {
    note_any(p->order());
    if (p->a && p->b) {
      mark(Source::kTime, "seq " + std::to_string(p->a->seq()) + ": " + Describe(*p->a, *p->b, ex));
    }
  }
  for (const Pair* p : collect(Event::kRunEnd, &diff.other_differences)) note_any(p->order());

  // History: a model call whose prompt changed with nothing recorded before it that
  // explains the change (no earlier differing event, same model, same params).
  for (const CallDifference& cd : diff.calls) {
    if (cd.first_prompt_token < 0 && cd.request_diff.empty()) continue;
    if (cd.seq_a <= earliest_any && cd.params.empty() && diff.model_differences.empty()) {
      mark(Source::kHistory,
           "call " + std::to_string(cd.call) + " (seq " + std::to_string(cd.seq_a) + "): " +
               (cd.first_prompt_token >= 0
                    ? "the prompt differs from token " + std::to_string(cd.first_prompt_token)
                    : std::string("the request differs")) +
               " with no earlier difference to explain it");
    }
    break;  // later prompts follow from the first call's difference
  }
  diff.sources = std::move(sources);

  if (options.call > 0) {
    const auto& calls = pairs[Event::kLlmCall];
    if (options.call > static_cast<int>(calls.size()) || !calls[options.call - 1].a ||
        !calls[options.call - 1].b) {
      return InvalidArgument(
          "--call " + std::to_string(options.call) + ": run " +
          (options.call <= static_cast<int>(calls.size()) && calls[options.call - 1].a
               ? diff.run_b
               : diff.run_a) +
          " has no model call " + std::to_string(options.call));
    }
    const auto& a = calls[options.call - 1].a->llm_call();
    const auto& b = calls[options.call - 1].b->llm_call();
    diff.side_by_side_call = options.call;
    int n = std::max(a.token_ids_size(), b.token_ids_size());
    for (int i = 0; i < n; ++i) {
      SideBySideRow row;
      row.step = i;
      if (i < a.token_ids_size()) row.id_a = a.token_ids(i);
      if (i < b.token_ids_size()) row.id_b = b.token_ids(i);
      row.text_a = TokenText(tokenizer, row.id_a);
      row.text_b = TokenText(tokenizer, row.id_b);
      row.logits_differ = i < a.logits_digests_size() && i < b.logits_digests_size() &&
                          a.logits_digests(i) != b.logits_digests(i);
      diff.side_by_side.push_back(std::move(row));
    }
  }
  return diff;
}

Result<RunDiff> DiffRuns(store::Store& store, const std::string& run_a, const std::string& run_b,
                         const DiffOptions& options) {
  TRACE_ASSIGN_OR_RETURN(std::string id_a, store.ResolveRunId(run_a));
  TRACE_ASSIGN_OR_RETURN(std::string id_b, store.ResolveRunId(run_b));
  TRACE_ASSIGN_OR_RETURN(proto::RunHeader ha, store.LoadHeader(id_a));
  TRACE_ASSIGN_OR_RETURN(proto::RunHeader hb, store.LoadHeader(id_b));
  TRACE_ASSIGN_OR_RETURN(std::vector<Event> ea, store.LoadEvents(id_a));
  TRACE_ASSIGN_OR_RETURN(std::vector<Event> eb, store.LoadEvents(id_b));
  // Token texts from either run's tokenizer, when its model folder is still there.
  std::unique_ptr<engine::Tokenizer> tokenizer;
  for (const auto* h : {&ha, &hb}) {
    const std::string& dir = h->model().model_dir();
    // A model gone or not readable: no token texts from it.
    if (dir.empty()) continue;
    if (Result<bool> has = engine::HasModelTokenizer(dir); !has.ok() || !*has) continue;
    auto tok = engine::LoadModelTokenizer(dir);
    if (tok.ok()) {
      tokenizer = std::move(*tok);
      break;
    }
  }
  return DiffLoadedRuns(ha, ea, hb, eb, tokenizer.get(), options);
}

}  // namespace trace::replayer
