// Driver for the tokenizer fuzz targets when built with g++ (no libFuzzer): runs the
// target over its seed corpus, then over random mutations of it for a bounded time.
//
// Ownership: none. Thread safety: single-threaded. Errors: a target signals a failed
// property by aborting; the driver itself returns non-zero on bad arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// Each target provides its seeds.
std::vector<std::string> TokenizerFuzzSeeds();
