#include "recorder/cassette/cassette.h"

#include <map>

#include "recorder/api/json_body.h"

namespace trace::recorder {

std::string ToolArgumentsKey(const nlohmann::json& arguments) {
  if (arguments.is_null()) return "{}";
  // nlohmann::json keeps object keys sorted: equal arguments, equal text.
  return arguments.dump();
}

Result<Cassette> Cassette::Load(store::Store& store, const std::string& run_id) {
  TRACE_ASSIGN_OR_RETURN(proto::RunHeader header, store.LoadHeader(run_id));
  header.set_run_id(run_id);
  TRACE_ASSIGN_OR_RETURN(std::vector<proto::Event> events, store.LoadEvents(run_id));
  return FromEvents(header, events);
}

Result<Cassette> Cassette::FromEvents(const proto::RunHeader& header,
                                      const std::vector<proto::Event>& events) {
  Cassette c;
  c.run_id_ = header.run_id();
  c.header_ = header;
  const std::string& run_id = c.run_id_;
  std::map<std::string, std::string> arguments_by_call_id;
  for (const proto::Event& e : events) {
    if (e.has_tool_call() && !e.tool_call().call_id().empty()) {
      arguments_by_call_id.emplace(e.tool_call().call_id(), e.tool_call().arguments_json());
    }
  }
  for (const proto::Event& e : events) {
    if (e.has_llm_call()) {
      RecordedCall r;
      r.number = static_cast<int>(c.calls_.size()) + 1;
      r.seq = e.seq();
      r.call = e.llm_call();
      TRACE_ASSIGN_OR_RETURN(r.identity, IdentityOfRecorded(r.call, r.seq));
      c.calls_.push_back(std::move(r));
    } else if (e.has_run_end()) {
      c.end_ = e.run_end();
      c.has_end_ = true;
    } else if (e.has_clock_read()) {
      c.clocks_.push_back({e.seq(), e.clock_read()});
    } else if (e.has_tool_result()) {
      RecordedTool t;
      t.seq = e.seq();
      t.result = e.tool_result();
      t.name = t.result.name();
      auto args = arguments_by_call_id.find(t.result.call_id());
      t.arguments_key =
          ToolArgumentsKey(args == arguments_by_call_id.end() ? nlohmann::json::object()
                                                              : ParseJsonOrDiscarded(args->second));
      c.tools_.push_back(std::move(t));
    }
  }
  if (c.calls_.empty()) {
    return FailedPrecondition("run " + run_id +
                              " has no model calls: there is nothing to re-run against");
  }
  return c;
}

bool Cassette::recorded_upstream() const {
  if (header_.attributes().count("upstream")) return true;
  for (const RecordedCall& r : calls_) {
    if (!r.call.upstream().empty()) return true;
  }
  return false;
}

std::string Cassette::model_name() const {
  for (const RecordedCall& r : calls_) {
    if (!r.call.model().empty()) return r.call.model();
  }
  return header_.model().model_name();
}

}  // namespace trace::recorder
