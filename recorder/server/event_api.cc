#include "recorder/server/event_api.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/escape.h"
#include "recorder/api/json_body.h"
#include "recorder/server/http_util.h"

namespace trace::recorder {

using json = nlohmann::json;

void EventApi::Register() {
  httplib::Server& http = frontend_->http();
  http.Post("/trace/v1/events", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    HandleEvents(req, res);
  });
  http.Get("/trace/v1/clock", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    HandleClock(req, res);
  });
  http.Post("/trace/v1/tool", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    HandleTool(req, res);
  });
  http.Post("/trace/v1/flush", [this](const httplib::Request& req, httplib::Response& res) {
    if (!frontend_->Authorized(req, res)) return;
    HandleFlush(req, res);
  });
}

void EventApi::HandleFlush(const httplib::Request&, httplib::Response& res) {
  RunLog* log = frontend_->log();
  uint64_t durable = 0;
  if (log) {
    Status st = log->writer().Flush();
    if (!st.ok()) return SendError(res, ErrorFromStatus(st));
    durable = log->writer().durable_seq();
  }
  res.set_content(json{{"durable_seq", durable}, {"recorded", log != nullptr}}.dump(),
                  "application/json");
}

void EventApi::HandleClock(const httplib::Request& req, httplib::Response& res) {
  RunLog* log = frontend_->log();
  int64_t wall = WallClockNs();
  int64_t mono =
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
          .count();
  std::string iso = Iso8601(wall);
  std::string clock = req.has_param("clock") ? req.get_param_value("clock") : "wall";
  if (clock != "wall" && clock != "monotonic") {
    ApiError e = BadRequest("clock", "clock must be 'wall' or 'monotonic'");
    frontend_->Reject(req, e);
    return SendError(res, e);
  }
  // `trace rerun`: the recorded read, so the agent sees the time it saw then.
  std::optional<proto::ClockRead> recorded;
  if (CallGate* gate = frontend_->gate()) recorded = gate->RecordedClock(clock);
  if (recorded) {
    (clock == "wall" ? wall : mono) = recorded->value_ns();
    if (clock == "wall") iso = recorded->text().empty() ? Iso8601(wall) : recorded->text();
  }
  uint64_t seq = 0;
  if (log) {
    proto::ClockRead c;
    c.set_clock(clock);
    c.set_value_ns(clock == "wall" ? wall : mono);
    c.set_text(clock == "wall" ? iso : std::to_string(mono));
    if (recorded) c.set_cassette_seq(recorded->cassette_seq());
    Result<uint64_t> r = log->RecordClock(std::move(c));
    // Acknowledged means stored: the agent sees the time only once the read is committed.
    if (Status st = frontend_->Commit(r); !st.ok()) return SendError(res, ErrorFromStatus(st));
    seq = *r;
  }
  res.set_content(json{{"clock", clock},
                       {"wall_ns", wall},
                       {"monotonic_ns", mono},
                       {"iso8601", iso},
                       {"seq", seq}}
                      .dump(),
                  "application/json");
}

void EventApi::HandleTool(const httplib::Request& http_req, httplib::Response& res) {
  auto parsed_body = ParseJsonBody(http_req.body);
  ApiError bad = BadRequest("name", "'name' is required and must be a string");
  if (auto* err = std::get_if<ApiError>(&parsed_body)) bad = *err;
  const json* body = std::get_if<json>(&parsed_body);
  if (body == nullptr || !body->is_object() || !body->contains("name") ||
      !(*body)["name"].is_string()) {
    frontend_->Reject(http_req, bad);
    return SendError(res, bad);
  }
  const std::string name = (*body)["name"].get<std::string>();
  json arguments = body->value("arguments", json::object());
  if (arguments.is_string()) arguments = ParseJsonOrDiscarded(arguments.get<std::string>());
  CallGate* gate = frontend_->gate();
  if (gate == nullptr) {
    // Not a re-run: the agent runs the tool and reports its result as a tool_result event.
    return res.set_content(json{{"recorded", false}}.dump(), "application/json");
  }
  const std::string call_id = body->contains("call_id") && (*body)["call_id"].is_string()
                                  ? (*body)["call_id"].get<std::string>()
                                  : std::string();
  auto answer = gate->LookupTool(name, arguments, call_id);
  if (auto* err = std::get_if<ApiError>(&answer)) {
    frontend_->Reject(http_req, *err);
    return SendError(res, *err);
  }
  auto& a = std::get<CallGate::ToolAnswer>(answer);
  if (!a.recorded) return res.set_content(json{{"recorded", false}}.dump(), "application/json");
  proto::ToolResult r = a.result;
  if (!call_id.empty()) r.set_call_id(call_id);
  r.set_cassette_seq(a.seq);
  const json reply{{"recorded", true},
                   {"content", r.content()},
                   {"is_error", r.is_error()},
                   {"cassette_seq", a.seq}};
  if (RunLog* log = frontend_->log()) {
    if (Status st = frontend_->Commit(log->RecordToolResult(std::move(r))); !st.ok()) {
      return SendError(res, ErrorFromStatus(st));
    }
  }
  res.set_content(reply.dump(), "application/json");
}

void EventApi::HandleEvents(const httplib::Request& http_req, httplib::Response& res) {
  RunLog* log = frontend_->log();
  if (!frontend_->Recordable(http_req, res)) return;
  auto parsed_body = ParseJsonBody(http_req.body);
  if (auto* err = std::get_if<ApiError>(&parsed_body)) {
    frontend_->Reject(http_req, *err);
    return SendError(res, *err);
  }
  json body = std::move(std::get<json>(parsed_body));
  if (!body.is_object()) {
    ApiError e = BadRequest("", "event body must be a JSON object");
    frontend_->Reject(http_req, e);
    return SendError(res, e);
  }
  json events = body.contains("events") ? body["events"] : json::array({body});
  if (!events.is_array() || events.empty()) {
    ApiError e = BadRequest("events", "'events' must be a non-empty array");
    frontend_->Reject(http_req, e);
    return SendError(res, e);
  }
  // Validate everything first, so a bad batch records nothing.
  std::vector<proto::Event> parsed;
  for (size_t i = 0; i < events.size(); ++i) {
    std::string where = body.contains("events") ? "events[" + std::to_string(i) + "]" : "";
    auto ev = ParseAgentEvent(events[i], where);
    if (auto* err = std::get_if<ApiError>(&ev)) {
      frontend_->Reject(http_req, *err);
      return SendError(res, *err);
    }
    parsed.push_back(std::move(std::get<proto::Event>(ev)));
  }
  json seqs = json::array();
  int duplicates = 0;
  uint64_t last_seq = 0;
  for (proto::Event& e : parsed) {
    if (!log) {
      seqs.push_back(0);
      continue;
    }
    Result<uint64_t> seq = uint64_t{0};
    switch (e.kind_case()) {
      case proto::Event::kToolCall:
        seq = log->RecordToolCall(std::move(*e.mutable_tool_call()));
        break;
      case proto::Event::kToolResult:
        seq = log->RecordToolResult(std::move(*e.mutable_tool_result()));
        break;
      case proto::Event::kContextChunk:
        seq = log->RecordContext(std::move(*e.mutable_context_chunk()));
        break;
      case proto::Event::kTemplateVar:
        seq = log->RecordTemplateVar(std::move(*e.mutable_template_var()));
        break;
      case proto::Event::kClockRead:
        seq = log->RecordClock(std::move(*e.mutable_clock_read()));
        break;
      default:
        seq = log->RecordNote(std::move(*e.mutable_note()));
    }
    if (!seq.ok()) return SendError(res, ErrorFromStatus(frontend_->Commit(seq)));
    if (*seq == 0) ++duplicates;
    seqs.push_back(*seq);
    last_seq = std::max(last_seq, *seq);
  }
  // Acknowledged means stored: answer once the events are committed, else 503.
  if (Status st = frontend_->Commit(last_seq); !st.ok()) {
    return SendError(res, ErrorFromStatus(st));
  }
  res.set_content(
      json{{"recorded", log != nullptr}, {"seqs", seqs}, {"duplicates", duplicates}}.dump(),
      "application/json");
}

std::variant<proto::Event, ApiError> EventApi::ParseAgentEvent(const json& j,
                                                               const std::string& where) {
  auto field = [&](const char* name) {
    return where.empty() ? std::string(name) : where + "." + name;
  };
  if (!j.is_object()) return BadRequest(where, "an event must be a JSON object");
  auto type_it = j.find("type");
  if (type_it == j.end() || !type_it->is_string()) {
    return BadRequest(field("type"), "'" + field("type") +
                                         "' must be one of tool_call, "
                                         "tool_result, context, template_var, clock, note");
  }
  std::string type = type_it->get<std::string>();
  std::optional<ApiError> err;
  // Reads an optional string member; an error names it when it is not a string.
  auto str = [&](const char* name, bool required = false) -> std::string {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
      if (required && !err) err = BadRequest(field(name), "'" + field(name) + "' is required");
      return "";
    }
    if (it->is_string()) return it->get<std::string>();
    if (!err) err = BadRequest(field(name), "'" + field(name) + "' must be a string");
    return "";
  };
  auto num = [&](const char* name) -> double {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return 0;
    if (it->is_number()) return it->get<double>();
    if (!err) err = BadRequest(field(name), "'" + field(name) + "' must be a number");
    return 0;
  };
  // An integer within int64, checked before any cast (1e30 and 2^64 are errors, not
  // INT64_MIN); an integral float within range is accepted.
  auto int64 = [&](const char* name) -> int64_t {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return 0;
    if (it->is_number_unsigned()) {
      if (it->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
        return static_cast<int64_t>(it->get<uint64_t>());
      }
    } else if (it->is_number_integer()) {
      return it->get<int64_t>();
    } else if (it->is_number_float()) {
      const double d = it->get<double>();
      if (std::floor(d) == d && d >= -0x1p63 && d < 0x1p63) return static_cast<int64_t>(d);
      if (std::floor(d) != d) {
        if (!err) err = BadRequest(field(name), "'" + field(name) + "' must be an integer");
        return 0;
      }
    } else {
      if (!err) err = BadRequest(field(name), "'" + field(name) + "' must be an integer");
      return 0;
    }
    if (!err) {
      err = OutOfRange(field(name), "'" + field(name) +
                                        "' must fit in a signed 64-bit integer, got " + it->dump());
    }
    return 0;
  };
  // JSON-valued members (arguments, data) may be given as objects or as text.
  auto json_text = [&](const char* name) -> std::string {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return "";
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  proto::Event e;
  if (type == "tool_call") {
    proto::ToolCall* c = e.mutable_tool_call();
    c->set_call_id(str("call_id"));
    c->set_name(str("name", true));
    c->set_arguments_json(json_text("arguments"));
    c->set_source("agent");
  } else if (type == "tool_result") {
    proto::ToolResult* r = e.mutable_tool_result();
    r->set_call_id(str("call_id"));
    r->set_name(str("name"));
    auto content = j.find("content");
    if (content != j.end() && !content->is_string() && !content->is_null()) {
      r->set_content(content->dump());
    } else {
      r->set_content(str("content", true));
    }
    auto is_error = j.find("is_error");
    if (is_error != j.end() && !is_error->is_null()) {
      if (!is_error->is_boolean()) {
        err = BadRequest(field("is_error"), "'" + field("is_error") + "' must be a boolean");
      } else {
        r->set_is_error(is_error->get<bool>());
      }
    }
    r->set_duration_ms(num("duration_ms"));
  } else if (type == "context") {
    proto::ContextChunk* c = e.mutable_context_chunk();
    c->set_source(str("source"));
    c->set_chunk_id(str("chunk_id"));
    c->set_content(str("content", true));
    c->set_score(num("score"));
    c->set_query(str("query"));
  } else if (type == "template_var") {
    proto::TemplateVar* v = e.mutable_template_var();
    v->set_name(str("name", true));
    auto value = j.find("value");
    if (value != j.end() && !value->is_string() && !value->is_null()) {
      v->set_value(value->dump());
    } else {
      v->set_value(str("value"));
    }
    v->set_template_name(str("template"));
  } else if (type == "clock") {
    proto::ClockRead* c = e.mutable_clock_read();
    c->set_clock(j.contains("clock") ? str("clock") : "agent");
    c->set_value_ns(int64("value_ns"));
    c->set_text(str("text"));
  } else if (type == "note") {
    proto::Note* n = e.mutable_note();
    n->set_topic(j.contains("topic") ? str("topic") : "agent");
    n->set_text(str("text", true));
    n->set_data_json(json_text("data"));
  } else {
    ApiError e2 = BadRequest(field("type"), "unknown event type \"" + EscapeForDisplay(type) +
                                                "\" (tool_call, tool_result, context, "
                                                "template_var, clock, note)");
    e2.http_status = 422;
    return e2;
  }
  if (err) return *err;
  return e;
}

}  // namespace trace::recorder
