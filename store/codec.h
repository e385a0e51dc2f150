// Row codec of the trace store: how an Event becomes an events-table payload and back
// (docs/trace-format.md, "Stored events"). Internal to store/, exposed for tests, the
// fuzz target and the benchmark.
//
// Ownership: pure functions over caller-owned values; the fetch callbacks are called
// synchronously. Thread safety: reentrant. Errors: a payload that does not decode gives a
// Corruption status saying what was wrong (the caller adds the run id and seq).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "proto/trace.pb.h"

namespace trace::store {

// events.encoding / blobs.encoding values.
enum PayloadEncoding : int {
  kEncodingRaw = 0,   // the bytes as they are
  kEncodingZstd = 1,  // one zstd frame with its content size
  // Blobs only: one zstd frame compressed with another blob's content (its last
  // kMaxPrefixBytes) as a raw-content prefix dictionary.
  kEncodingZstdPrefix = 2,
};

// How much of a dictionary blob's content (its tail) serves as the zstd prefix.
inline constexpr size_t kMaxPrefixBytes = size_t{1} << 20;
// The part of `dict` used as prefix by kEncodingZstdPrefix.
std::string_view PrefixTail(std::string_view dict);

// Largest payload/blob we will decompress (guards against corrupt size fields).
inline constexpr uint64_t kMaxDecodedBytes = uint64_t{1} << 31;

// zstd-compresses `data` when that is smaller; returns the bytes and sets *encoding.
std::string CompressIfSmaller(std::string_view data, int level, int* encoding);
// Like CompressIfSmaller, compressing against PrefixTail(dict) (kEncodingZstdPrefix).
std::string CompressWithPrefix(std::string_view data, std::string_view dict, int level,
                               int* encoding);
// Inverts CompressIfSmaller / CompressWithPrefix (`dict` only for kEncodingZstdPrefix).
Result<std::string> Decompress(std::string_view data, int encoding, std::string_view dict = {});

// Fails when the per-sampled-token arrays of `call` have different lengths, or
// layer_digests is not num_layers * token_ids long, or route_ids not route_width *
// token_ids (naming the field).
Status CheckTokenArrays(const proto::LlmCall& call);
// The per-sampled-token arrays of `call` as byte-shuffled columns (TokenColumns).
// Fails when the arrays have different lengths (naming the field).
Status PackTokenColumns(const proto::LlmCall& call, proto::TokenColumns* out);
// Inverts PackTokenColumns into `call`'s arrays (which must be empty; call->route_width()
// says how many route ids each token has).
Status UnpackTokenColumns(const proto::TokenColumns& columns, int32_t num_layers,
                          proto::LlmCall* call);

// Visits every set string/bytes field of `event` (recursing into sub-messages, skipping
// map fields) whose value is at least `min_bytes` long. `visit` may take the value.
using LargeFieldVisitor =
    std::function<Status(const std::vector<proto::FieldPathStep>& path, std::string* value)>;
Status ForEachLargeField(proto::Event* event, size_t min_bytes, const LargeFieldVisitor& visit);
// Sets the string/bytes field at `path` in `event` (which must exist for repeated fields).
Status SetFieldAtPath(proto::Event* event, const proto::BlobRef& ref, std::string value);

// Fails (InvalidArgument naming the field) when a `string` field of `message` (an event,
// recursively, map entries included) is not valid UTF-8 (base/utf8.h: RFC 3629, no
// overlongs or surrogates, what protobuf itself checks): protobuf would refuse to parse
// such a record back. Use `bytes` fields for raw data (Output.data).
Status CheckUtf8(const google::protobuf::Message& message);

// Makes every `string` field of `message` (recursively, map keys and values included) valid
// UTF-8, each maximal invalid subpart replaced by U+FFFD (base/utf8.h SanitizeUtf8). Only a
// damaged or hand-made store gives such a message; returns whether anything changed.
bool SanitizeUtf8Fields(google::protobuf::Message* message);

// Length of the longest common prefix.
size_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b);
size_t CommonPrefix(std::string_view a, std::string_view b);

// Looks up a blob's full content by SHA-256 (hex).
using BlobFetcher = std::function<Result<std::shared_ptr<const std::string>>(const std::string&)>;
// Looks up the full prompt token ids of the LlmCall with this seq in the same run.
using PromptFetcher =
    std::function<Result<std::shared_ptr<const std::vector<int32_t>>>(uint64_t seq)>;

// Decodes one events row (payload + encoding) of event `seq` back into the full Event.
Result<proto::Event> DecodeEventRow(uint64_t seq, std::string_view payload, int encoding,
                                    const BlobFetcher& blobs, const PromptFetcher& prompts);

}  // namespace trace::store
