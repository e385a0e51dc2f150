// Hashes used across trace: SHA-256 for fingerprints of files (model weights, config,
// tokenizer, chat template) and a 64-bit XXH3 digest for logits vectors and blobs.
//
// Ownership: pure functions over caller-owned bytes. Thread safety: all functions are
// reentrant. Errors: only the file variant can fail (Status names the path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trace {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);
// Lower-case hex SHA-256 of a file's bytes, streamed (works for multi-GB weights).
Result<std::string> Sha256File(const std::string& path);

// XXH3-64 of raw bytes.
uint64_t Digest64(const void* data, size_t size);
// The logits digest recorded per sampled token: XXH3-64 of the float bits, in order, with
// every NaN as 0x7fc00000. Which NaN an operation returns is not in the numerics contract
// (docs/numerics.md section 1: x86 and AArch64 make different ones), so two machines that
// agree on every other bit give one digest.
uint64_t LogitsDigest(std::span<const float> logits);
// 16 lower-case hex digits.
std::string DigestHex(uint64_t digest);

}  // namespace trace
