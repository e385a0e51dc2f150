#include "recorder/constrained.h"

#include "base/hash.h"
#include "recorder/api/json_body.h"
#include "recorder/api/qwen_tool_calls.h"
#include "recorder/grammar/json_schema.h"
#include "recorder/grammar/matcher.h"

namespace trace::recorder {
namespace {

using ojson = nlohmann::ordered_json;

// A version-2 constraint: the grammar matcher.
class GrammarConstraint : public Constraint {
 public:
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> g,
                    std::shared_ptr<const grammar::TokenIndex> index, int32_t end_token)
      : matcher_(std::move(g), std::move(index), end_token) {}
  void AllowedMask(std::vector<uint8_t>* mask) override { matcher_.FillMask(mask); }
  Status Advance(int32_t token) override { return matcher_.Advance(token); }
  bool Done() const override { return matcher_.Done(); }

 private:
  grammar::Matcher matcher_;
};

// A tool's parameter schema; a schema without a type describes the arguments object.
ojson ArgumentsSchema(const ojson& parameters) {
  if (!parameters.is_object()) return ojson{{"type", "object"}};
  for (const char* k : {"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"}) {
    if (parameters.contains(k)) return parameters;
  }
  ojson s = parameters;
  s["type"] = "object";
  return s;
}

// <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>, for each tool; several,
// one per line, when `parallel`.
Result<grammar::GrammarBuilder::Expr> ToolCalls(grammar::GrammarBuilder* b, const ojson& tools,
                                                bool parallel) {
  if (!tools.is_array() || tools.empty()) {
    return InvalidArgument("constraint spec: 'tools' must be a non-empty array");
  }
  std::vector<grammar::GrammarBuilder::Expr> options;
  for (const ojson& tool : tools) {
    if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string()) {
      return InvalidArgument("constraint spec: each tool needs a string 'name'");
    }
    const std::string name = tool["name"].get<std::string>();
    grammar::SchemaOptions so;
    so.strict =
        tool.contains("strict") && tool["strict"].is_boolean() && tool["strict"].get<bool>();
    so.where = "function '" + name + "' parameters";
    TRACE_ASSIGN_OR_RETURN(
        int32_t args,
        grammar::AddJsonSchema(
            b, ArgumentsSchema(tool.contains("parameters") ? tool["parameters"] : ojson::object()),
            so));
    options.push_back(b->Seq({b->Literal(std::string(kToolCallOpen) + "\n{\"name\": " +
                                         ojson(name).dump() + ", \"arguments\": "),
                              b->Call(args), b->Literal("}\n" + std::string(kToolCallClose))}));
  }
  grammar::GrammarBuilder::Expr one = b->Alt(std::move(options));
  if (!parallel) return one;
  int32_t call = b->DeclareRule("tool_call");
  b->DefineRule(call, one);
  return b->Seq({b->Call(call), b->Star(b->Seq({b->Literal("\n"), b->Call(call)}))});
}

bool Flag(const ojson& spec, const char* key, bool fallback) {
  auto it = spec.find(key);
  return it != spec.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

Result<std::shared_ptr<const grammar::Grammar>> CompileConstraintGrammar(const ojson& spec) {
  if (!spec.is_object() || !spec.contains("kind") || !spec["kind"].is_string()) {
    return InvalidArgument("constraint spec: 'kind' must be a string");
  }
  const std::string kind = spec["kind"].get<std::string>();
  grammar::GrammarBuilder b;
  std::vector<grammar::GrammarBuilder::Expr> options;
  if (kind == "tool_call") {
    TRACE_ASSIGN_OR_RETURN(
        auto calls, ToolCalls(&b, spec.value("tools", ojson()), Flag(spec, "parallel", false)));
    options.push_back(calls);
  } else if (kind == "json") {
    const std::string format = spec.value("format", std::string());
    if (format == "json_object") {
      options.push_back(b.Call(grammar::AddAnyJsonObject(&b)));
    } else if (format == "json_schema") {
      grammar::SchemaOptions so;
      so.strict = Flag(spec, "strict", false);
      so.where = "response_format.json_schema.schema";
      TRACE_ASSIGN_OR_RETURN(int32_t rule,
                             grammar::AddJsonSchema(&b, spec.value("schema", ojson::object()), so));
      options.push_back(b.Call(rule));
    } else {
      return InvalidArgument("constraint spec: 'format' must be json_object or json_schema");
    }
    if (spec.contains("tools")) {
      TRACE_ASSIGN_OR_RETURN(auto calls,
                             ToolCalls(&b, spec["tools"], Flag(spec, "parallel", false)));
      options.push_back(calls);
    }
  } else {
    return InvalidArgument("constraint spec: unknown kind \"" + kind + "\"");
  }
  int32_t root = b.DeclareRule("root");
  b.DefineRule(root, b.Alt(std::move(options)));
  return b.Build(root);
}

ConstraintFactory::ConstraintFactory(const engine::Tokenizer& tokenizer, int32_t end_token,
                                     size_t cache_entries)
    : tokenizer_(tokenizer),
      end_token_(end_token),
      cache_entries_(std::max<size_t>(cache_entries, 1)) {}

std::shared_ptr<const grammar::TokenIndex> ConstraintFactory::Index() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!index_) index_ = grammar::TokenIndex::Build(tokenizer_);
  return index_;
}

const TokenClasses& ConstraintFactory::Classes() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!classes_) classes_ = std::make_unique<TokenClasses>(tokenizer_);
  return *classes_;
}

Result<std::shared_ptr<const grammar::Grammar>> ConstraintFactory::Grammar(
    const std::string& spec_json, const ojson& spec) {
  const uint64_t key = Digest64(spec_json.data(), spec_json.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = by_hash_.find(key); it != by_hash_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.cache_hits;
      return it->second->second;
    }
  }
  // Compiled outside the lock; two threads compiling the same new spec both succeed.
  TRACE_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::Grammar> g, CompileConstraintGrammar(spec));
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.compiled;
  if (by_hash_.find(key) == by_hash_.end()) {
    lru_.emplace_front(key, g);
    by_hash_[key] = lru_.begin();
    while (lru_.size() > cache_entries_) {
      by_hash_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return g;
}

Result<std::unique_ptr<Constraint>> ConstraintFactory::Create(const std::string& spec_json) {
  ojson spec = ParseOrderedJsonOrDiscarded(spec_json);
  if (spec.is_discarded() || !spec.is_object()) {
    return InvalidArgument("constraint spec is not a JSON object");
  }
  int32_t end_token = end_token_;
  if (auto it = spec.find("end_token"); it != spec.end() && it->is_number_integer()) {
    end_token = it->get<int32_t>();
  }
  auto version = spec.find("version");
  if (version == spec.end()) {
    return Constraint::Create(nlohmann::json(spec), tokenizer_, Classes(), end_token);
  }
  if (!version->is_number_integer() || version->get<int>() != kConstraintSpecVersion) {
    return InvalidArgument("constraint spec version " + version->dump() +
                           " is not supported by this build (it knows 1 and 2)");
  }
  TRACE_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::Grammar> g, Grammar(spec_json, spec));
  return std::unique_ptr<Constraint>(
      std::make_unique<GrammarConstraint>(std::move(g), Index(), end_token));
}

ConstraintFactory::Stats ConstraintFactory::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::string ConstraintSpecFor(const CompletionRequest& req, bool tools_rendered) {
  if (!req.guided_choice.empty()) return GuidedChoiceSpec(req.guided_choice).dump();
  auto tool_list = [&](const std::string& only) {
    ojson tools = ojson::array();
    for (const ToolSpec& t : req.tools) {
      if (!only.empty() && t.name != only) continue;
      bool have_ordered = !t.parameters_ordered.empty() || t.parameters.empty();
      ojson tool = {{"name", t.name},
                    {"parameters", have_ordered ? t.parameters_ordered : ojson(t.parameters)}};
      if (t.strict) tool["strict"] = true;
      tools.push_back(std::move(tool));
    }
    return tools;
  };
  const bool forced = tools_rendered && (req.tool_choice == ToolChoice::kRequired ||
                                         req.tool_choice == ToolChoice::kNamed);
  if (forced) {
    const bool named = req.tool_choice == ToolChoice::kNamed;
    ojson spec = {{"kind", "tool_call"},
                  {"version", kConstraintSpecVersion},
                  {"parallel", !named && req.parallel_tool_calls},
                  {"tools", tool_list(named ? req.tool_choice_name : std::string())}};
    return spec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const ResponseFormat& rf = req.response_format;
  if (rf.kind == ResponseFormat::kText) return "";
  ojson spec = {{"kind", "json"}, {"version", kConstraintSpecVersion}};
  if (rf.kind == ResponseFormat::kJsonObject) {
    spec["format"] = "json_object";
  } else {
    spec["format"] = "json_schema";
    spec["name"] = rf.name;
    spec["strict"] = rf.strict;
    spec["schema"] = rf.schema;
  }
  if (tools_rendered && req.tool_choice == ToolChoice::kAuto && !req.tools.empty()) {
    spec["tools"] = tool_list("");
    spec["parallel"] = req.parallel_tool_calls;
  }
  return spec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace trace::recorder
