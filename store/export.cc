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

}  // namespace trace::store
