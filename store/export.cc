#include "store/export.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <memory>

#include "store/codec.h"

namespace trace::store {

namespace {

Result<std::string> EncodeJson(const google::protobuf::Message& message,
                               const google::protobuf::util::JsonPrintOptions& options) {
  // protobuf's MessageToJsonString serialises the message with SerializeAsString and turns
  // those bytes into JSON: map entries then come in the map's iteration order, which differs
  // from process to process. Deterministic serialisation writes them sorted by key.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream stream(&binary);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializePartialToCodedStream(&coded)) {
      return Internal("JSON encoding of " + message.GetTypeName() + " failed: cannot serialise it");
    }
  }
  constexpr char kTypeUrlPrefix[] = "type.googleapis.com";
  const google::protobuf::DescriptorPool* pool = message.GetDescriptor()->file()->pool();
  static google::protobuf::util::TypeResolver* const generated =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          kTypeUrlPrefix, google::protobuf::DescriptorPool::generated_pool());
  std::unique_ptr<google::protobuf::util::TypeResolver> own;
  google::protobuf::util::TypeResolver* resolver = generated;
  if (pool != google::protobuf::DescriptorPool::generated_pool()) {
    own.reset(google::protobuf::util::NewTypeResolverForDescriptorPool(kTypeUrlPrefix, pool));
    resolver = own.get();
  }
  std::string out;
  auto st = google::protobuf::util::BinaryToJsonString(
      resolver, std::string(kTypeUrlPrefix) + "/" + message.GetDescriptor()->full_name(), binary,
      &out, options);
  if (!st.ok())
    return Internal("JSON encoding of " + message.GetTypeName() +
                    " failed: " + std::string(st.message()));
  return out;
}

}  // namespace

Result<std::string> MessageToJson(const google::protobuf::Message& message,
                                  const google::protobuf::util::JsonPrintOptions& options) {
  // A string field holds valid UTF-8 unless a store was damaged or made by hand; protobuf's
  // printer would turn such bytes into "\u0000" and drop some. Those strings are written
  // with each invalid subpart as U+FFFD instead, from a copy.
  if (!CheckUtf8(message).ok()) {
    std::unique_ptr<google::protobuf::Message> copy(message.New());
    copy->CopyFrom(message);
    SanitizeUtf8Fields(copy.get());
    return EncodeJson(*copy, options);
  }
  return EncodeJson(message, options);
}

Result<std::string> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.always_print_enums_as_ints = false;
  return MessageToJson(message, options);
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
