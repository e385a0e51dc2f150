// `trace doctor`: this machine's fingerprint and a numerics self-test, so a user learns
// before an incident whether this machine reproduces the canonical bits. Every kernel path
// present runs the canonical-v2 kernel self-test (kernels/selftest.h: seeded cases through
// every op, digests pinned) — the scalar reference, AVX2 when the CPU has it, each CUDA
// device — and every engine path runs the whole-model golden prompts (engine/golden.h).
//
// Ownership: values; the model check writes a temporary model folder and removes it.
// Thread safety: one call at a time (it creates engines). Errors: a check that cannot run
// (no bundled tokenizer for the model, a CUDA failure) is reported in its DoctorCheck, never
// as a failed call.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/fingerprint.h"

namespace trace::engine {

struct DoctorCheck {
  enum class Outcome { kPass, kFail, kSkipped, kError };
  std::string path;   // "cpu reference" | "cpu avx2" | "cpu avx512" | "cuda:0"
  std::string check;  // "kernels" (the kernel self-test) | "model" (the golden prompts)
  Outcome outcome = Outcome::kSkipped;
  int passed = 0;
  int total = 0;
  std::vector<std::string> mismatches;  // "matmul.bf16.m3: 36c0... (pinned 41af...)"
  std::string note;                     // why it was skipped, or the error
  double seconds = 0;
};
const char* OutcomeName(DoctorCheck::Outcome outcome);  // "pass" | "FAIL" | "skipped" | "error"

struct DoctorReport {
  MachineFingerprint machine;
  std::string numerics_version;  // kernels::kNumericsVersion
  std::string trace_version, git_revision, compiler;
  std::vector<DoctorCheck> checks;
  // Every check that ran matched the pinned digests.
  bool reproduces() const;
  bool any_failed() const;  // a mismatch (not an error or skip)
};

struct DoctorOptions {
  bool model_check = true;  // also run the golden prompts on a temporary tiny model
  std::function<void(const std::string&)> progress;  // one line per check started
};

DoctorReport RunDoctor(const DoctorOptions& options);

std::string RenderDoctorText(const DoctorReport& report);
std::string RenderDoctorJson(const DoctorReport& report);  // one JSON object, 2-space indent

}  // namespace trace::engine
