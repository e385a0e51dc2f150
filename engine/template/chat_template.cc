// ChatTemplate: loading from tokenizer_config.json and rendering with the variables
// transformers' apply_chat_template passes.
#include "engine/template/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/escape.h"
#include "base/files.h"
#include "base/ordered_json.h"
#include "engine/template/template_internal.h"

namespace trace::engine {
namespace {

// Every error leaving this module is one line that names the template. Values were
// clipped where they entered a message (Quote, Describe); this escapes the rest (the
// origin, a character of the source) and bounds the whole.
Status ForDisplay(const Status& st, const std::string& origin) {
  if (st.ok()) return st;
  std::string m = st.message();
  if (m.rfind("template ", 0) != 0 && m.rfind("chat template ", 0) != 0) {
    m = "template " + origin + ": " + m;
  }
  return Status(st.code(), EscapeForDisplay(m, 6 * kDisplayLimit));
}

Result<std::string> ForDisplay(Result<std::string> r, const std::string& origin) {
  if (r.ok()) return r;
  return ForDisplay(r.status(), origin);
}

class TemplateImpl final : public ChatTemplate {
 public:
  TemplateImpl(std::string source, std::unique_ptr<tmpl::Program> program)
      : source_(std::move(source)), program_(std::move(program)) {}

  Result<std::string> RenderOrdered(const nlohmann::ordered_json& messages,
                                    const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                    const nlohmann::ordered_json& extra_kwargs) const override {
    const std::string& origin = program_->origin;
    if (!messages.is_array()) {
      return ForDisplay(
          InvalidArgument("chat template " + origin + ": messages must be a JSON array"), origin);
    }
    if (!tools.is_null() && !tools.is_array()) {
      return ForDisplay(
          InvalidArgument("chat template " + origin + ": tools must be a JSON array or null"),
          origin);
    }
    if (!extra_kwargs.is_null() && !extra_kwargs.is_object()) {
      return ForDisplay(InvalidArgument("chat template " + origin +
                                        ": extra kwargs must be a JSON object or null"),
                        origin);
    }
    auto globals = std::make_shared<tmpl::Dict>();
    // Nested deeper than kMaxValueDepth: refused here, as the renderer refuses to build it.
    auto from_json = [&](const std::string& what, const nlohmann::ordered_json& j) -> Status {
      auto v = tmpl::Value::FromJson(j);
      if (!v.ok()) {
        return InvalidArgument("chat template " + origin + ": " + what + ": " +
                               v.status().message());
      }
      globals->Set(what, std::move(v).value());
      return Status::Ok();
    };
    if (Status st = from_json("messages", messages); !st.ok()) return ForDisplay(st, origin);
    if (Status st = from_json("tools", tools); !st.ok()) return ForDisplay(st, origin);
    globals->Set("documents", tmpl::Value::None());
    globals->Set("add_generation_prompt", tmpl::Value::Bool(add_generation_prompt));
    if (!bos_token_.empty()) globals->Set("bos_token", tmpl::Value::Str(bos_token_));
    if (!eos_token_.empty()) globals->Set("eos_token", tmpl::Value::Str(eos_token_));
    if (extra_kwargs.is_object()) {
      for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) {
        if (Status st = from_json(it.key(), it.value()); !st.ok()) {
          return ForDisplay(st, origin);
        }
      }
    }
    return ForDisplay(tmpl::RenderProgram(*program_, std::move(globals), limits_), origin);
  }

  const std::string& source() const override { return source_; }
  const std::string& bos_token() const override { return bos_token_; }
  const std::string& eos_token() const override { return eos_token_; }
  void SetSpecialTokens(std::string bos_token, std::string eos_token) override {
    bos_token_ = std::move(bos_token);
    eos_token_ = std::move(eos_token);
  }
  const RenderLimits& limits() const override { return limits_; }
  void SetLimits(const RenderLimits& limits) override { limits_ = limits; }

 private:
  std::string source_;
  std::unique_ptr<tmpl::Program> program_;
  std::string bos_token_;
  std::string eos_token_;
  RenderLimits limits_;
};

// A special token is a string or an AddedToken object {"content": ...}; null means unset.
Result<std::string> SpecialToken(const nlohmann::ordered_json& config, const char* field,
                                 const std::string& path) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return InvalidArgument(path + ": field '" + field +
                         "' must be a string or an object with a string 'content'");
}

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(std::string(what) + " " + EscapePathForDisplay(path) + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return IOError(std::string(what) + " " + EscapePathForDisplay(path) + ": read failed");
  }
  return ss.str();
}

// Converts without dump()+parse(): dump() throws on invalid UTF-8 and we never throw.
nlohmann::ordered_json ToOrdered(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (auto it = j.begin(); it != j.end(); ++it) {
        AppendDistinctMember(out, it.key(), ToOrdered(it.value()));  // a json's keys differ
      }
      return out;
    }
    case nlohmann::json::value_t::array: {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto& e : j) out.push_back(ToOrdered(e));
      return out;
    }
    case nlohmann::json::value_t::string:
      return j.get<std::string>();
    case nlohmann::json::value_t::boolean:
      return j.get<bool>();
    case nlohmann::json::value_t::number_integer:
      return j.get<int64_t>();
    case nlohmann::json::value_t::number_unsigned:
      return j.get<uint64_t>();
    case nlohmann::json::value_t::number_float:
      return j.get<double>();
    default:
      return nullptr;
  }
}

}  // namespace

Result<std::string> ChatTemplate::Render(const nlohmann::json& messages,
                                         const nlohmann::json& tools, bool add_generation_prompt,
                                         const nlohmann::json& extra_kwargs) const {
  // nlohmann::json stores objects sorted; the ordered copy keeps that order.
  return RenderOrdered(ToOrdered(messages), ToOrdered(tools), add_generation_prompt,
                       ToOrdered(extra_kwargs));
}

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(std::string_view source,
                                                          std::string origin) {
  auto program = tmpl::ParseProgram(source, origin);
  if (!program.ok()) return ForDisplay(program.status(), origin);
  TRACE_RETURN_IF_ERROR(ForDisplay(tmpl::ValidateProgram(**program), origin));
  return std::unique_ptr<ChatTemplate>(
      std::make_unique<TemplateImpl>(std::string(source), std::move(program).value()));
}

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::FromTokenizerConfig(
    const std::string& tokenizer_config_json_path, const std::string& shown_dir) {
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<ChatTemplate> t,
                         FromTokenizerConfigIfAny(tokenizer_config_json_path, shown_dir));
  if (t == nullptr) {
    return NotFound(EscapePathForDisplay(tokenizer_config_json_path) +
                    ": no field 'chat_template' and no chat_template.jinja beside it");
  }
  return t;
}

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::FromTokenizerConfigIfAny(
    const std::string& tokenizer_config_json_path, const std::string& shown_dir) {
  const std::string& file = tokenizer_config_json_path;
  const std::string path = EscapePathForDisplay(file);  // as messages show it
  // How render errors name a file of the template's folder.
  auto shown = [&](const std::string& full, const char* name) {
    return shown_dir.empty() ? EscapePathForDisplay(full)
                             : EscapePathForDisplay(shown_dir) + "/" + name;
  };
  TRACE_ASSIGN_OR_RETURN(std::string text, ReadFile(file, "tokenizer config"));
  nlohmann::ordered_json config = ParseOrderedJson(text);
  if (config.is_discarded() || !config.is_object()) {
    return Corruption(path + ": not a JSON object");
  }
  std::string source;
  std::string origin = shown(file, "tokenizer_config.json") + ":chat_template";
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    // Newer transformers save the template next to the config as chat_template.jinja.
    auto jinja = std::filesystem::path(file).parent_path() / "chat_template.jinja";
    TRACE_ASSIGN_OR_RETURN(bool has_jinja, PathExists(jinja.string()));
    if (!has_jinja) return std::unique_ptr<ChatTemplate>();  // the model has none
    TRACE_ASSIGN_OR_RETURN(source, ReadFile(jinja.string(), "chat template"));
    origin = shown(jinja.string(), "chat_template.jinja");
  } else if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {
    // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    bool found = false;
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
          !entry["name"].is_string() || !entry["template"].is_string()) {
        return InvalidArgument(path +
                               ": field 'chat_template' list entries need string 'name' and "
                               "'template'");
      }
      if (entry["name"] == "default") {
        source = entry["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) return NotFound(path + ": field 'chat_template' has no template named 'default'");
    origin = shown(file, "tokenizer_config.json") + ":chat_template[default]";
  } else {
    return InvalidArgument(path + ": field 'chat_template' must be a string or a list");
  }
  TRACE_ASSIGN_OR_RETURN(std::string bos, SpecialToken(config, "bos_token", path));
  TRACE_ASSIGN_OR_RETURN(std::string eos, SpecialToken(config, "eos_token", path));
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<ChatTemplate> t, Parse(source, origin));
  t->SetSpecialTokens(std::move(bos), std::move(eos));
  return t;
}

}  // namespace trace::engine
