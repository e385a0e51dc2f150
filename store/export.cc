#include "store/export.h"

#include <google/protobuf/util/json_util.h>

namespace trace::store {

Result<std::string> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.always_print_enums_as_ints = false;
  std::string out;
  auto st = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!st.ok())
    return Internal("JSON encoding of " + message.GetTypeName() +
                    " failed: " + std::string(st.message()));
  return out;
}

Status JsonToMessage(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  auto st = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!st.ok()) return InvalidArgument(std::string(st.message()));
  return Status::Ok();
}

std::string EventKindName(const proto::Event& event) {
  if (event.kind_case() == proto::Event::KIND_NOT_SET) return "unknown";
  return proto::Event::descriptor()->FindFieldByNumber(event.kind_case())->name();
}

Status ExportRunJson(Store& store, const std::string& run_id, std::ostream& out) {
  TRACE_ASSIGN_OR_RETURN(RunSummary summary, store.GetRunSummary(run_id));
  TRACE_ASSIGN_OR_RETURN(proto::RunHeader header, store.LoadHeader(run_id));
  TRACE_ASSIGN_OR_RETURN(std::string header_json, MessageToJson(header));
  TRACE_ASSIGN_OR_RETURN(auto it, store.ReadEvents(run_id));
  // Decode everything before writing, so a bad row yields an error and no partial file.
  std::string events_json;
  EventRecord rec;
  bool first = true;
  while (it->Next(&rec)) {
    TRACE_RETURN_IF_ERROR(rec.status);
    TRACE_ASSIGN_OR_RETURN(std::string e, MessageToJson(rec.event));
    events_json += first ? "\n  " : ",\n  ";
    events_json += e;
    first = false;
  }
  TRACE_RETURN_IF_ERROR(it->status());
  out << "{\"format\":\"trace-run\",\"format_version\":" << proto::CURRENT_FORMAT_VERSION
      << ",\"summary\":{\"run_id\":\"" << summary.run_id << "\",\"status\":\""
      << RunStatusName(summary.status) << "\",\"events\":" << summary.events
      << ",\"model_calls\":" << summary.model_calls
      << ",\"sampled_tokens\":" << summary.sampled_tokens
      << ",\"stored_bytes\":" << summary.stored_bytes << "},\n\"header\":" << header_json
      << ",\n\"events\":[" << events_json << "\n]}\n";
  if (!out) return IOError("writing the export of run " + run_id + " failed");
  return Status::Ok();
}

}  // namespace trace::store
