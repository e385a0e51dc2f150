#include "store/codec.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "base/utf8.h"

namespace trace::store {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Byte-plane shuffle of `n` little-endian values of `width` bytes each, appended to out.
template <typename T>
void AppendShuffled(const T* values, size_t n, std::string* out) {
  constexpr size_t kWidth = sizeof(T);
  const size_t base = out->size();
  out->resize(base + n * kWidth);
  char* dst = out->data() + base;
  for (size_t i = 0; i < n; ++i) {
    unsigned char bytes[kWidth];
    std::memcpy(bytes, &values[i], kWidth);  // little-endian host (x86-64, aarch64)
    for (size_t b = 0; b < kWidth; ++b) dst[b * n + i] = static_cast<char>(bytes[b]);
  }
}

template <typename T>
void ReadShuffled(const char* src, size_t n, T* values) {
  constexpr size_t kWidth = sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    unsigned char bytes[kWidth];
    for (size_t b = 0; b < kWidth; ++b) bytes[b] = static_cast<unsigned char>(src[b * n + i]);
    std::memcpy(&values[i], bytes, kWidth);
  }
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Bytes per sampled token in TokenColumns::columns.
constexpr size_t kColumnBytesPerToken = 4 + 8 + 4 + 4 + 4 + 4;

Status VisitMessage(Message* msg, size_t min_bytes, std::vector<proto::FieldPathStep>* path,
                    const LargeFieldVisitor& visit) {
  const Reflection* refl = msg->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(*msg, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->is_map()) continue;  // map entry order is not stable across parse/serialize
    proto::FieldPathStep step;
    step.set_field(f->number());
    if (f->type() == FieldDescriptor::TYPE_STRING || f->type() == FieldDescriptor::TYPE_BYTES) {
      if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(*msg, f); ++i) {
          if (refl->GetRepeatedStringReference(*msg, f, i, nullptr).size() < min_bytes) continue;
          std::string value = refl->GetRepeatedString(*msg, f, i);
          step.set_index(i);
          path->push_back(step);
          Status st = visit(*path, &value);
          path->pop_back();
          TRACE_RETURN_IF_ERROR(st);
          refl->SetRepeatedString(msg, f, i, std::move(value));
        }
      } else {
        std::string scratch;
        if (refl->GetStringReference(*msg, f, &scratch).size() < min_bytes) continue;
        std::string value = refl->GetString(*msg, f);
        step.set_index(-1);
        path->push_back(step);
        Status st = visit(*path, &value);
        path->pop_back();
        TRACE_RETURN_IF_ERROR(st);
        refl->SetString(msg, f, std::move(value));
      }
    } else if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(*msg, f); ++i) {
          step.set_index(i);
          path->push_back(step);
          Status st = VisitMessage(refl->MutableRepeatedMessage(msg, f, i), min_bytes, path, visit);
          path->pop_back();
          TRACE_RETURN_IF_ERROR(st);
        }
      } else {
        step.set_index(-1);
        path->push_back(step);
        Status st = VisitMessage(refl->MutableMessage(msg, f), min_bytes, path, visit);
        path->pop_back();
        TRACE_RETURN_IF_ERROR(st);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

std::string CompressIfSmaller(std::string_view data, int level, int* encoding) {
  *encoding = kEncodingRaw;
  if (data.size() < 64) return std::string(data);
  std::string out(ZSTD_compressBound(data.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n) || n >= data.size()) return std::string(data);
  out.resize(n);
  *encoding = kEncodingZstd;
  return out;
}

std::string_view PrefixTail(std::string_view dict) {
  return dict.size() > kMaxPrefixBytes ? dict.substr(dict.size() - kMaxPrefixBytes) : dict;
}

std::string CompressWithPrefix(std::string_view data, std::string_view dict, int level,
                               int* encoding) {
  *encoding = kEncodingRaw;
  if (data.size() < 16) return std::string(data);
  std::string_view prefix = PrefixTail(dict);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  std::string out(ZSTD_compressBound(data.size()), '\0');
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_refPrefix(cctx, prefix.data(), prefix.size());
  size_t n = ZSTD_compress2(cctx, out.data(), out.size(), data.data(), data.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n) || n >= data.size()) return std::string(data);
  out.resize(n);
  *encoding = kEncodingZstdPrefix;
  return out;
}

Result<std::string> Decompress(std::string_view data, int encoding, std::string_view dict) {
  if (encoding == kEncodingRaw) return std::string(data);
  if (encoding != kEncodingZstd && encoding != kEncodingZstdPrefix) {
    return Corruption("unknown payload encoding " + std::to_string(encoding));
  }
  unsigned long long size = ZSTD_getFrameContentSize(data.data(), data.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Corruption("zstd frame header is invalid");
  }
  if (size > kMaxDecodedBytes) {
    return Corruption("zstd frame claims " + std::to_string(size) + " bytes");
  }
  // Stream into a buffer that grows with the real output, so a damaged frame that claims
  // a huge size cannot make us allocate it up front.
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 27);
  if (encoding == kEncodingZstdPrefix) {
    std::string_view prefix = PrefixTail(dict);
    ZSTD_DCtx_refPrefix(dctx, prefix.data(), prefix.size());
  }
  std::string out(std::min<unsigned long long>(size, 4 * data.size() + 4096), '\0');
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  size_t produced = 0;
  size_t rc = 1;
  while (true) {
    if (produced == out.size() && out.size() < size) {
      out.resize(std::min<unsigned long long>(size, out.size() * 2 + 1));
    }
    ZSTD_outBuffer ob{out.data(), out.size(), produced};
    const size_t in_before = in.pos;
    rc = ZSTD_decompressStream(dctx, &ob, &in);
    const bool progress = in.pos != in_before || ob.pos != produced;
    produced = ob.pos;
    if (ZSTD_isError(rc) || rc == 0) break;
    if (!progress) break;  // input ran out mid-frame, or output would exceed the claim
  }
  ZSTD_freeDCtx(dctx);
  if (ZSTD_isError(rc)) return Corruption(std::string("zstd: ") + ZSTD_getErrorName(rc));
  if (rc != 0 || produced != size) {
    return Corruption("zstd frame is truncated or longer than its content size");
  }
  if (in.pos != in.size) return Corruption("trailing bytes after the zstd frame");
  out.resize(produced);
  return out;
}

Status CheckTokenArrays(const proto::LlmCall& call) {
  const size_t n = call.token_ids_size();
  auto check = [&](size_t size, const char* name) -> Status {
    if (size == n) return Status::Ok();
    return InvalidArgument("LlmCall." + std::string(name) + " has " + std::to_string(size) +
                           " entries but token_ids has " + std::to_string(n));
  };
  TRACE_RETURN_IF_ERROR(check(call.logits_digests_size(), "logits_digests"));
  TRACE_RETURN_IF_ERROR(check(call.logits_size(), "logits"));
  TRACE_RETURN_IF_ERROR(check(call.logprobs_size(), "logprobs"));
  TRACE_RETURN_IF_ERROR(check(call.runner_up_ids_size(), "runner_up_ids"));
  TRACE_RETURN_IF_ERROR(check(call.runner_up_logits_size(), "runner_up_logits"));
  if (call.num_layers() < 0) return InvalidArgument("LlmCall.num_layers is negative");
  const size_t layer_count = static_cast<size_t>(call.num_layers()) * n;
  if (call.layer_digests_size() != 0 &&
      static_cast<size_t>(call.layer_digests_size()) != layer_count) {
    return InvalidArgument(
        "LlmCall.layer_digests has " + std::to_string(call.layer_digests_size()) +
        " entries, expected num_layers * token_ids = " + std::to_string(layer_count));
  }
  if (call.route_width() < 0) return InvalidArgument("LlmCall.route_width is negative");
  const size_t route_count = static_cast<size_t>(call.route_width()) * n;
  if (call.route_ids_size() != 0 && static_cast<size_t>(call.route_ids_size()) != route_count) {
    return InvalidArgument(
        "LlmCall.route_ids has " + std::to_string(call.route_ids_size()) +
        " entries, expected route_width * token_ids = " + std::to_string(route_count));
  }
  return Status::Ok();
}

Status PackTokenColumns(const proto::LlmCall& call, proto::TokenColumns* out) {
  TRACE_RETURN_IF_ERROR(CheckTokenArrays(call));
  const size_t n = call.token_ids_size();
  const size_t layer_count = static_cast<size_t>(call.num_layers()) * n;
  out->Clear();
  out->set_count(static_cast<uint32_t>(n));
  std::string* cols = out->mutable_columns();
  cols->reserve(n * kColumnBytesPerToken);
  AppendShuffled(call.token_ids().data(), n, cols);
  AppendShuffled(call.logits_digests().data(), n, cols);
  AppendShuffled(call.logits().data(), n, cols);
  AppendShuffled(call.logprobs().data(), n, cols);
  AppendShuffled(call.runner_up_ids().data(), n, cols);
  // The runner-up logit is close to the chosen one: XOR cancels the shared high bits.
  std::vector<uint32_t> runner_xor(n);
  for (size_t i = 0; i < n; ++i) {
    runner_xor[i] = FloatBits(call.runner_up_logits(i)) ^ FloatBits(call.logits(i));
  }
  AppendShuffled(runner_xor.data(), n, cols);
  if (call.layer_digests_size() > 0) {
    AppendShuffled(call.layer_digests().data(), layer_count, out->mutable_layer_digests());
  }
  if (call.route_ids_size() > 0) {
    AppendShuffled(call.route_ids().data(), static_cast<size_t>(call.route_ids_size()),
                   out->mutable_route_ids());
  }
  return Status::Ok();
}

Status UnpackTokenColumns(const proto::TokenColumns& columns, int32_t num_layers,
                          proto::LlmCall* call) {
  const size_t n = columns.count();
  if (columns.columns().size() != n * kColumnBytesPerToken) {
    return Corruption("token columns hold " + std::to_string(columns.columns().size()) +
                      " bytes, expected " + std::to_string(n * kColumnBytesPerToken) + " for " +
                      std::to_string(n) + " tokens");
  }
  if (num_layers < 0) return Corruption("num_layers is negative");
  const size_t layer_count = static_cast<size_t>(num_layers) * n;
  if (!columns.layer_digests().empty() && columns.layer_digests().size() != layer_count * 8) {
    return Corruption("layer digests hold " + std::to_string(columns.layer_digests().size()) +
                      " bytes, expected " + std::to_string(layer_count * 8));
  }
  if (call->route_width() < 0) return Corruption("route_width is negative");
  const size_t route_count = static_cast<size_t>(call->route_width()) * n;
  if (!columns.route_ids().empty() && columns.route_ids().size() != route_count * 4) {
    return Corruption("routes hold " + std::to_string(columns.route_ids().size()) +
                      " bytes, expected " + std::to_string(route_count * 4));
  }
  const char* p = columns.columns().data();
  call->mutable_token_ids()->Resize(n, 0);
  ReadShuffled(p, n, call->mutable_token_ids()->mutable_data());
  p += 4 * n;
  call->mutable_logits_digests()->Resize(n, 0);
  ReadShuffled(p, n, call->mutable_logits_digests()->mutable_data());
  p += 8 * n;
  call->mutable_logits()->Resize(n, 0.0f);
  ReadShuffled(p, n, call->mutable_logits()->mutable_data());
  p += 4 * n;
  call->mutable_logprobs()->Resize(n, 0.0f);
  ReadShuffled(p, n, call->mutable_logprobs()->mutable_data());
  p += 4 * n;
  call->mutable_runner_up_ids()->Resize(n, 0);
  ReadShuffled(p, n, call->mutable_runner_up_ids()->mutable_data());
  p += 4 * n;
  std::vector<uint32_t> runner_xor(n);
  ReadShuffled(p, n, runner_xor.data());
  call->mutable_runner_up_logits()->Resize(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    call->set_runner_up_logits(i, BitsFloat(runner_xor[i] ^ FloatBits(call->logits(i))));
  }
  if (!columns.layer_digests().empty()) {
    call->mutable_layer_digests()->Resize(layer_count, 0);
    ReadShuffled(columns.layer_digests().data(), layer_count,
                 call->mutable_layer_digests()->mutable_data());
  }
  if (!columns.route_ids().empty()) {
    call->mutable_route_ids()->Resize(route_count, 0);
    ReadShuffled(columns.route_ids().data(), route_count,
                 call->mutable_route_ids()->mutable_data());
  }
  return Status::Ok();
}

Status ForEachLargeField(proto::Event* event, size_t min_bytes, const LargeFieldVisitor& visit) {
  std::vector<proto::FieldPathStep> path;
  return VisitMessage(event, std::max<size_t>(min_bytes, 1), &path, visit);
}

Status SetFieldAtPath(proto::Event* event, const proto::BlobRef& ref, std::string value) {
  Message* msg = event;
  for (int s = 0; s < ref.path_size(); ++s) {
    const proto::FieldPathStep& step = ref.path(s);
    const Reflection* refl = msg->GetReflection();
    const FieldDescriptor* f = msg->GetDescriptor()->FindFieldByNumber(step.field());
    if (f == nullptr || f->is_map()) {
      return Corruption("blob reference names unknown field " + std::to_string(step.field()) +
                        " in " + msg->GetDescriptor()->name());
    }
    const bool last = s + 1 == ref.path_size();
    const bool is_string =
        f->type() == FieldDescriptor::TYPE_STRING || f->type() == FieldDescriptor::TYPE_BYTES;
    if (last != is_string || (!last && f->type() != FieldDescriptor::TYPE_MESSAGE)) {
      return Corruption("blob reference path does not end at a string field (" +
                        msg->GetDescriptor()->name() + "." + f->name() + ")");
    }
    if (f->is_repeated()) {
      if (step.index() < 0 || step.index() >= refl->FieldSize(*msg, f)) {
        return Corruption("blob reference index " + std::to_string(step.index()) +
                          " is out of range for " + f->full_name());
      }
      if (last) {
        refl->SetRepeatedString(msg, f, step.index(), std::move(value));
        return Status::Ok();
      }
      msg = refl->MutableRepeatedMessage(msg, f, step.index());
    } else {
      if (step.index() != -1) {
        return Corruption("blob reference indexes singular field " + f->full_name());
      }
      if (last) {
        refl->SetString(msg, f, std::move(value));
        return Status::Ok();
      }
      msg = refl->MutableMessage(msg, f);
    }
  }
  return Corruption("blob reference has an empty path");
}

namespace {

Status CheckUtf8Message(const Message& msg) {
  const Reflection* refl = msg.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(msg, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      std::string scratch;
      const int count = f->is_repeated() ? refl->FieldSize(msg, f) : 1;
      for (int i = 0; i < count; ++i) {
        const std::string& v = f->is_repeated()
                                   ? refl->GetRepeatedStringReference(msg, f, i, &scratch)
                                   : refl->GetStringReference(msg, f, &scratch);
        if (!IsValidUtf8(v)) return InvalidArgument(f->full_name() + " is not valid UTF-8");
      }
    } else if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(msg, f); ++i) {
          TRACE_RETURN_IF_ERROR(CheckUtf8Message(refl->GetRepeatedMessage(msg, f, i)));
        }
      } else {
        TRACE_RETURN_IF_ERROR(CheckUtf8Message(refl->GetMessage(msg, f)));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckUtf8(const Message& message) {
  return CheckUtf8Message(message);
}

bool SanitizeUtf8Fields(Message* msg) {
  const Reflection* refl = msg->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(*msg, &fields);
  bool changed = false;
  for (const FieldDescriptor* f : fields) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      std::string scratch;
      const int count = f->is_repeated() ? refl->FieldSize(*msg, f) : 1;
      for (int i = 0; i < count; ++i) {
        const std::string& v = f->is_repeated()
                                   ? refl->GetRepeatedStringReference(*msg, f, i, &scratch)
                                   : refl->GetStringReference(*msg, f, &scratch);
        if (IsValidUtf8(v)) continue;
        std::string valid = SanitizeUtf8(v);
        if (f->is_repeated()) {
          refl->SetRepeatedString(msg, f, i, std::move(valid));
        } else {
          refl->SetString(msg, f, std::move(valid));
        }
        changed = true;
      }
    } else if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(*msg, f); ++i) {
          changed |= SanitizeUtf8Fields(refl->MutableRepeatedMessage(msg, f, i));
        }
      } else {
        changed |= SanitizeUtf8Fields(refl->MutableMessage(msg, f));
      }
    }
  }
  return changed;
}

size_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

size_t CommonPrefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

Result<proto::Event> DecodeEventRow(uint64_t seq, std::string_view payload, int encoding,
                                    const BlobFetcher& blobs, const PromptFetcher& prompts) {
  TRACE_ASSIGN_OR_RETURN(std::string bytes, Decompress(payload, encoding));
  proto::StoredEvent stored;
  if (!stored.ParseFromString(bytes)) return Corruption("payload is not a StoredEvent protobuf");
  proto::Event event = std::move(*stored.mutable_event());
  event.set_seq(seq);
  if (event.kind_case() == proto::Event::KIND_NOT_SET) {
    return Corruption("event has no kind (unknown to this build, or damaged)");
  }
  for (const proto::BlobRef& ref : stored.blobs()) {
    TRACE_ASSIGN_OR_RETURN(auto content, blobs(ref.sha256()));
    TRACE_RETURN_IF_ERROR(SetFieldAtPath(&event, ref, *content));
  }
  const bool has_tokens = stored.has_tokens();
  const bool has_prompt = stored.has_prompt();
  if ((has_tokens || has_prompt) && !event.has_llm_call()) {
    return Corruption("token columns on an event that is not an LlmCall");
  }
  if (has_tokens) {
    proto::LlmCall* call = event.mutable_llm_call();
    if (call->token_ids_size() || call->logits_digests_size() || call->logits_size() ||
        call->logprobs_size() || call->runner_up_ids_size() || call->runner_up_logits_size() ||
        call->layer_digests_size()) {
      return Corruption("LlmCall has both token columns and inline token arrays");
    }
    TRACE_RETURN_IF_ERROR(UnpackTokenColumns(stored.tokens(), call->num_layers(), call));
  }
  if (has_prompt) {
    const proto::StoredPrompt& sp = stored.prompt();
    proto::LlmCall* call = event.mutable_llm_call();
    if (call->prompt_token_ids_size() != 0) {
      return Corruption("LlmCall has both a stored prompt and inline prompt tokens");
    }
    auto* ids = call->mutable_prompt_token_ids();
    if (sp.base_seq() != 0) {
      if (sp.base_seq() >= seq) {
        return Corruption("prompt prefix refers to seq " + std::to_string(sp.base_seq()) +
                          ", not an earlier event");
      }
      auto base = prompts(sp.base_seq());
      if (!base.ok()) {
        return Status(base.status().code(), "prompt prefix from seq " +
                                                std::to_string(sp.base_seq()) + ": " +
                                                base.status().message());
      }
      const std::vector<int32_t>& base_ids = **base;
      if (sp.prefix_len() > base_ids.size()) {
        return Corruption("prompt prefix of " + std::to_string(sp.prefix_len()) +
                          " tokens is longer than seq " + std::to_string(sp.base_seq()) +
                          "'s prompt (" + std::to_string(base_ids.size()) + ")");
      }
      ids->Reserve(sp.prefix_len() + sp.suffix_size());
      ids->Add(base_ids.begin(), base_ids.begin() + sp.prefix_len());
    } else if (sp.prefix_len() != 0) {
      return Corruption("prompt prefix length without a base event");
    }
    ids->Add(sp.suffix().begin(), sp.suffix().end());
  }
  if (event.has_llm_call()) {
    // Inline arrays (no token columns) are checked too: readers index them in step.
    Status st = CheckTokenArrays(event.llm_call());
    if (!st.ok()) return Corruption(st.message());
  }
  return event;
}

}  // namespace trace::store
