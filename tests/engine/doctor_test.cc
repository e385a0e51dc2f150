// `trace doctor`: the machine fingerprint and the numerics self-test, through the library
// (every CPU path present passes the pinned digests) and through the CLI (text and --json,
// exit codes), as a user runs it.

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/doctor.h"
#include "engine/fingerprint.h"
#include "engine/golden.h"
#include "engine_test_util.h"
#include "kernels/kernels.h"
#include "kernels/selftest.h"

namespace trace::engine {
namespace {

// The CPU as /proc/cpuinfo describes it on x86 ("model name", "flags") and on ARM, which has
// no model name: the CPU ID fields name it, "Features" lists NEON (asimd) and its extensions.
TEST(Doctor, CpuModelAndFlagsFromX86AndArmCpuInfo) {
  const std::string x86 =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core "
      "Processor\nflags\t\t: fpu sse4_2 avx fma f16c avx2 avx512f avx512bw avx512vl\n"
      "vmx flags\t: ept\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n";
  EXPECT_EQ(CpuModelFromCpuInfo(x86), "AMD EPYC 9654 96-Core Processor");
  EXPECT_EQ(KernelCpuFlagsFromCpuInfo(x86),
            (std::vector<std::string>{"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
                                      "avx512vl"}));
  const std::string graviton3 =
      "processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 "
      "sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 "
      "asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm "
      "svebf16 i8mm bf16 dgh rng\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU "
      "variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n";
  EXPECT_EQ(CpuModelFromCpuInfo(graviton3),
            "arm implementer 0x41 part 0xd40 variant 0x1 revision 1");
  EXPECT_EQ(
      KernelCpuFlagsFromCpuInfo(graviton3),
      (std::vector<std::string>{"asimd", "fphp", "asimdhp", "asimddp", "sve", "bf16", "i8mm"}));
  EXPECT_EQ(CpuModelFromCpuInfo(""), "");
  EXPECT_TRUE(KernelCpuFlagsFromCpuInfo("").empty());
}

TEST(Doctor, EveryCpuPathReproducesThePinnedDigests) {
  std::vector<std::string> progress;
  DoctorOptions options;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  const DoctorReport report = RunDoctor(options);
  EXPECT_EQ(report.numerics_version, kernels::kNumericsVersion);
  EXPECT_EQ(report.machine.cpu_isa_path, kernels::CpuIsaPathName(kernels::Impl::kAuto));
  EXPECT_GT(report.machine.cpu_cores, 0);
  // Every CPU path this machine has (reference, then avx2, then avx512 where present), each
  // with the kernel self-test and the golden prompts; no GPU here unless the machine has one.
  const std::vector<kernels::Impl> available = kernels::AvailableCpuIsaPaths();
  const size_t cpu_paths = available.size();
  const size_t paths = cpu_paths + report.machine.cuda.devices.size();
  ASSERT_EQ(report.checks.size(), 2 * paths);
  for (const DoctorCheck& c : report.checks) {
    EXPECT_EQ(c.outcome, DoctorCheck::Outcome::kPass)
        << c.path << " " << c.check << ": " << c.note
        << (c.mismatches.empty() ? "" : c.mismatches[0]);
    EXPECT_EQ(c.passed, c.total) << c.path << " " << c.check;
    const size_t expected =
        c.check == "kernels" ? kernels::SelfTestCases().size() : GoldenPrompts().size();
    EXPECT_EQ(c.total, static_cast<int>(expected)) << c.path << " " << c.check;
  }
  EXPECT_EQ(report.checks[0].path, "cpu reference");
  for (size_t i = 1; i < cpu_paths; ++i) {
    EXPECT_EQ(report.checks[i].path,
              std::string("cpu ") + kernels::CpuIsaPathName(available[cpu_paths - 1 - i]));
  }
  EXPECT_TRUE(report.reproduces());
  EXPECT_FALSE(progress.empty());
  const std::string text = RenderDoctorText(report);
  EXPECT_NE(text.find("reproduces the canonical bits"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel path   " + report.machine.cpu_isa_path), std::string::npos) << text;
}

// cuBLAS is opened at run time (kernels/cuda/cublas_loader.h): the text names its version,
// or why it could not be loaded.
TEST(Doctor, TextShowsTheCublasVersionOrWhyItIsMissing) {
  DoctorReport report;
  report.machine.cuda.backend_built = true;
  report.machine.cuda.runtime_version = "13.0";
  report.machine.cuda.cublas_version = "13.1.0";
  EXPECT_NE(RenderDoctorText(report).find("  cuda runtime  13.0, cuBLAS 13.1.0\n"),
            std::string::npos)
      << RenderDoctorText(report);
  report.machine.cuda.cublas_version = "";
  report.machine.cuda.cublas_error =
      "cuBLAS 13 could not be loaded (libcublas.so.13: cannot open shared object file: No such "
      "file or directory): install the CUDA 13 libraries or use --device cpu";
  EXPECT_NE(RenderDoctorText(report).find("  cuda runtime  13.0, cuBLAS not loaded: cuBLAS 13 "
                                          "could not be loaded (libcublas.so.13: cannot open"),
            std::string::npos)
      << RenderDoctorText(report);
  const auto j = nlohmann::json::parse(RenderDoctorJson(report));
  EXPECT_EQ(j["machine"]["cuda"]["cublas_error"], report.machine.cuda.cublas_error);
}

using testing::Ran;
using testing::RunTrace;

TEST(DoctorCli, JsonNamesTheMachineAndEveryCheck) {
  testing::TempDir tmp;
  const Ran r = RunTrace("doctor --json", tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["numerics"], kernels::kNumericsVersion);
  EXPECT_EQ(j["machine"]["cpu_kernel_path"], kernels::CpuIsaPathName(kernels::Impl::kAuto));
  EXPECT_TRUE(j["machine"]["cuda"].contains("backend_built"));
  if (j["machine"]["cuda"]["backend_built"].get<bool>()) {
    // Exactly one of cuBLAS's version and the reason it could not be loaded.
    EXPECT_NE(j["machine"]["cuda"]["cublas_version"] == "",
              j["machine"]["cuda"]["cublas_error"] == "")
        << j["machine"]["cuda"].dump();
  }
  EXPECT_TRUE(j["reproduces"].get<bool>());
  bool reference_kernels = false, reference_model = false;
  for (const auto& c : j["checks"]) {
    EXPECT_EQ(c["result"], "pass") << c.dump();
    reference_kernels |= c["path"] == "cpu reference" && c["check"] == "kernels";
    reference_model |= c["path"] == "cpu reference" && c["check"] == "model";
  }
  EXPECT_TRUE(reference_kernels && reference_model) << r.out;
  EXPECT_NE(r.err.find("doctor: kernel self-test on cpu reference"), std::string::npos) << r.err;
}

TEST(DoctorCli, NoModelRunsTheKernelsOnlyAndBadFlagsExitTwo) {
  testing::TempDir tmp;
  const Ran r = RunTrace("doctor --no-model", tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("cpu reference   kernels  pass"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" model "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("this machine reproduces the canonical bits"), std::string::npos) << r.out;
  const Ran bad = RunTrace("doctor --jsn", tmp.path());
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
}

}  // namespace
}  // namespace trace::engine
