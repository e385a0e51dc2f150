#include "engine/doctor.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/build_info.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/golden.h"
#include "engine/model_init.h"
#include "kernels/selftest.h"

namespace trace::engine {
namespace {

using Outcome = DoctorCheck::Outcome;

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void Score(const std::vector<kernels::SelfTestResult>& results, DoctorCheck* check) {
  check->total = static_cast<int>(results.size());
  for (const auto& r : results) {
    if (r.ok()) {
      ++check->passed;
    } else {
      check->mismatches.push_back(r.name + ": " + Hex(r.digest) + " (pinned " + Hex(r.pinned) +
                                  ")");
    }
  }
  check->outcome = check->passed == check->total ? Outcome::kPass : Outcome::kFail;
}

// A temporary folder holding the golden model, removed on destruction.
struct GoldenModel {
  std::string dir;
  std::shared_ptr<const Model> model;
  Status status;
  GoldenModel() {
    std::error_code ec;
    std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    if (ec) {
      status = IOError("no temporary folder ($TMPDIR or /tmp): " + ec.message());
      return;
    }
    std::string tmpl = (tmp / "trace-doctor-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      status = IOError(tmpl + ": cannot create a temporary folder: " + std::strerror(errno));
      return;
    }
    dir = tmpl;
    status = InitModel(kGoldenPreset, kGoldenSeed, dir + "/model");
    if (!status.ok()) return;
    auto loaded = Model::Load(dir + "/model", /*hash_weights=*/false);
    if (!loaded.ok()) {
      status = loaded.status();
      return;
    }
    model = *loaded;
  }
  ~GoldenModel() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

void RunModelCheck(const GoldenModel& golden, const std::string& device, kernels::Impl impl,
                   DoctorCheck* check) {
  EngineOptions options;
  options.device = device;
  options.impl = impl;
  options.max_context = 256;
  auto engine = Engine::Create(golden.model, options);
  if (!engine.ok()) {
    check->outcome = Outcome::kError;
    check->note = engine.status().ToString();
    return;
  }
  auto digests = GoldenDigests(**engine);
  if (!digests.ok()) {
    check->outcome = Outcome::kError;
    check->note = digests.status().ToString();
    return;
  }
  const auto& prompts = GoldenPrompts();
  check->total = static_cast<int>(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    if ((*digests)[i] == prompts[i].digest) {
      ++check->passed;
    } else {
      check->mismatches.push_back(std::string(prompts[i].name) + ": " + (*digests)[i] +
                                  " (pinned " + prompts[i].digest + ")");
    }
  }
  check->outcome = check->passed == check->total ? Outcome::kPass : Outcome::kFail;
}

}  // namespace

const char* OutcomeName(DoctorCheck::Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kFail:
      return "FAIL";
    case Outcome::kSkipped:
      return "skipped";
    case Outcome::kError:
      return "error";
  }
  return "";
}

bool DoctorReport::reproduces() const {
  for (const DoctorCheck& c : checks) {
    if (c.outcome == Outcome::kFail || c.outcome == Outcome::kError) return false;
  }
  return true;
}

bool DoctorReport::any_failed() const {
  for (const DoctorCheck& c : checks) {
    if (c.outcome == Outcome::kFail) return true;
  }
  return false;
}

DoctorReport RunDoctor(const DoctorOptions& options) {
  DoctorReport report;
  report.machine = ReadMachineFingerprint();
  report.numerics_version = kernels::kNumericsVersion;
  report.trace_version = TRACE_VERSION;
  report.git_revision = TRACE_GIT_REVISION;
  report.compiler = TRACE_COMPILER;
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };

  // The paths present: CPU reference, the CPU's SIMD paths, every CUDA device.
  struct Path {
    std::string name, device;
    kernels::Impl impl;
  };
  // Every CPU path this machine has (reference first, then AVX2 and AVX-512, or NEON).
  std::vector<Path> paths;
  const std::vector<kernels::Impl> cpu_paths = kernels::AvailableCpuIsaPaths();
  for (auto it = cpu_paths.rbegin(); it != cpu_paths.rend(); ++it) {
    paths.push_back({std::string("cpu ") + kernels::CpuIsaPathName(*it), "cpu", *it});
  }
  for (const kernels::CudaDeviceInfo& d : report.machine.cuda.devices) {
    paths.push_back({"cuda:" + std::to_string(d.ordinal), "cuda:" + std::to_string(d.ordinal),
                     kernels::Impl::kAuto});
  }

  for (const Path& p : paths) {
    progress("kernel self-test on " + p.name);
    DoctorCheck check;
    check.path = p.name;
    check.check = "kernels";
    const auto start = std::chrono::steady_clock::now();
    if (p.device == "cpu") {
      kernels::KernelContext ctx;
      ctx.impl = p.impl;
      Score(kernels::RunCpuSelfTest(ctx), &check);
    } else {
      auto ordinal = ParseCudaDevice(p.device);
      auto results = ordinal.ok() ? RunCudaKernelSelfTest(*ordinal)
                                  : Result<std::vector<kernels::SelfTestResult>>(ordinal.status());
      if (results.ok()) {
        Score(*results, &check);
      } else {
        check.outcome = Outcome::kError;
        check.note = results.status().ToString();
      }
    }
    check.seconds = Since(start);
    report.checks.push_back(std::move(check));
  }

  if (options.model_check) {
    progress("writing the golden model (" + std::string(kGoldenPreset) + ", seed " +
             std::to_string(kGoldenSeed) + ")");
    const GoldenModel golden;
    for (const Path& p : paths) {
      DoctorCheck check;
      check.path = p.name;
      check.check = "model";
      const auto start = std::chrono::steady_clock::now();
      if (!golden.status.ok()) {
        check.outcome = Outcome::kSkipped;
        check.note = golden.status.ToString();
      } else {
        progress("golden prompts on " + p.name);
        RunModelCheck(golden, p.device, p.impl, &check);
      }
      check.seconds = Since(start);
      report.checks.push_back(std::move(check));
    }
  }
  return report;
}

std::string RenderDoctorText(const DoctorReport& r) {
  std::ostringstream o;
  const MachineFingerprint& m = r.machine;
  o << "trace " << r.trace_version << " (" << r.git_revision << ", " << r.compiler << "), numerics "
    << r.numerics_version << "\n\n";
  o << "machine\n";
  o << "  cpu           " << (m.cpu_model.empty() ? "(unknown)" : m.cpu_model) << ", "
    << m.cpu_cores << " threads\n";
  std::string flags;
  for (const auto& f : m.cpu_flags) flags += (flags.empty() ? "" : " ") + f;
  o << "  cpu flags     " << (flags.empty() ? "(none of interest)" : flags) << "\n";
  o << "  kernel path   " << m.cpu_isa_path << " (cpu)\n";
  o << "  os            " << m.os << "\n";
  const kernels::CudaStack& c = m.cuda;
  if (!c.backend_built) {
    o << "  cuda          not built into this binary\n";
  } else {
    if (c.driver_release.empty() && c.driver_cuda.empty()) {
      o << "  cuda driver   none found\n";
    } else {
      o << "  cuda driver   "
        << (c.driver_release.empty() ? std::string("(release unknown)") : c.driver_release)
        << (c.driver_cuda.empty() ? "" : ", supports CUDA " + c.driver_cuda) << "\n";
    }
    o << "  cuda runtime  " << c.runtime_version << ", cuBLAS "
      << (c.cublas_version.empty() ? "not loaded: " + c.cublas_error : c.cublas_version) << "\n";
    if (c.devices.empty()) {
      o << "  gpus          none" << (c.error.empty() ? "" : " (" + c.error + ")") << "\n";
    }
    for (const auto& d : c.devices) {
      char mem[32];
      std::snprintf(mem, sizeof(mem), "%.1f GiB",
                    static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
      o << "  cuda:" << d.ordinal << "        " << d.name << ", compute capability "
        << d.compute_capability << ", " << d.sm_count << " SMs, " << mem << "\n";
    }
  }
  o << "\nnumerics self-test (" << r.numerics_version << " pinned digests)\n";
  o << "  path            check    result   passed  seconds\n";
  for (const DoctorCheck& ch : r.checks) {
    char line[160];
    std::snprintf(
        line, sizeof(line), "  %-15s %-8s %-8s %6s  %7.2f", ch.path.c_str(), ch.check.c_str(),
        OutcomeName(ch.outcome),
        ch.total > 0 ? (std::to_string(ch.passed) + "/" + std::to_string(ch.total)).c_str() : "-",
        ch.seconds);
    o << line << "\n";
    for (const auto& mm : ch.mismatches) o << "      mismatch: " << mm << "\n";
    if (!ch.note.empty()) o << "      " << ch.note << "\n";
  }
  o << "\n"
    << (r.reproduces() ? "this machine reproduces the canonical bits on every path present\n"
                       : "this machine does NOT reproduce the canonical bits on every path: a "
                         "replay here may not be bitwise\n");
  return o.str();
}

std::string RenderDoctorJson(const DoctorReport& r) {
  nlohmann::ordered_json j;
  j["trace_version"] = r.trace_version;
  j["git_revision"] = r.git_revision;
  j["compiler"] = r.compiler;
  j["numerics"] = r.numerics_version;
  const MachineFingerprint& m = r.machine;
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const auto& d : m.cuda.devices) {
    gpus.push_back({{"device", "cuda:" + std::to_string(d.ordinal)},
                    {"name", d.name},
                    {"compute_capability", d.compute_capability},
                    {"sm_count", d.sm_count},
                    {"memory_bytes", d.memory_bytes}});
  }
  j["machine"] = {{"cpu_model", m.cpu_model},
                  {"cpu_flags", m.cpu_flags},
                  {"cpu_cores", m.cpu_cores},
                  {"cpu_kernel_path", m.cpu_isa_path},
                  {"os", m.os},
                  {"cuda",
                   {{"backend_built", m.cuda.backend_built},
                    {"driver_release", m.cuda.driver_release},
                    {"driver_cuda", m.cuda.driver_cuda},
                    {"runtime_version", m.cuda.runtime_version},
                    {"cublas_version", m.cuda.cublas_version},
                    {"cublas_error", m.cuda.cublas_error},
                    {"devices", gpus},
                    {"error", m.cuda.error}}}};
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const DoctorCheck& c : r.checks) {
    checks.push_back({{"path", c.path},
                      {"check", c.check},
                      {"result", OutcomeName(c.outcome)},
                      {"passed", c.passed},
                      {"total", c.total},
                      {"mismatches", c.mismatches},
                      {"note", c.note},
                      {"seconds", c.seconds}});
  }
  j["checks"] = checks;
  j["reproduces"] = r.reproduces();
  return j.dump(2) + "\n";
}

}  // namespace trace::engine
