// What every fuzz target in tests/fuzz/ provides (docs/fuzzing.md).
//
// A target is one file, tests/fuzz/<name>.cc, defining:
//   - LLVMFuzzerTestOneInput: runs the code under test on one input and checks its
//     promises; a broken promise calls std::abort() (after printing what broke), so the
//     fuzzer or the driver reports the input.
//   - TraceFuzzSeeds(): seeds computed in code (valid inputs in the current format, made by
//     the writer or a generator, so they follow format changes); may be empty. The files of
//     tests/fuzz/corpus/<name>/ are seeds as well.
// It is built two ways: with libFuzzer (clang, TRACE_LIBFUZZER=ON, scripts/fuzz.sh), where
// libfuzzer_seeds.cc writes TraceFuzzSeeds() into the working corpus, and with
// fuzz_driver.cc (any compiler; the ctest in CI), which replays the seeds and corpus and
// then a fixed number of mutations of them.
//
// Ownership: seeds are returned by value. Thread safety: the fuzzer calls the target from
// one thread. Errors: a target never throws; it returns 0 or aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

std::vector<std::string> TraceFuzzSeeds();
