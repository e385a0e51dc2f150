// FillFingerprints (recorder/server.h): the model, engine and device facts of a run
// header, so that replay and diff can say what changed between then and now.
#include <sys/utsname.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/build_info.h"
#include "base/hash.h"
#include "recorder/server.h"

namespace trace::recorder {
namespace {

std::string ReadCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "";
}

std::vector<std::string> ReadCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      for (const char* f : {"avx2", "fma", "avx512f", "f16c", "sse4_2"}) {
        if (line.find(std::string(" ") + f) != std::string::npos) out.push_back(f);
      }
      break;
    }
  }
  return out;
}

}  // namespace

void FillFingerprints(const LocalBackend& backend, proto::RunHeader* header) {
  const engine::Model& model = *backend.model;
  const engine::ModelFingerprint& fp = model.fingerprint();
  proto::ModelFingerprint* m = header->mutable_model();
  m->set_architecture(fp.architecture);
  m->set_dtype(fp.dtype);
  m->set_parameter_count(fp.parameter_count);
  m->set_weights_sha256(fp.weights_sha256);
  m->set_config_sha256(fp.config_sha256);
  m->set_tokenizer_sha256(fp.tokenizer_sha256);
  m->set_chat_template_sha256(fp.chat_template_sha256.empty()
                                  ? Sha256Hex(backend.chat_template->source())
                                  : fp.chat_template_sha256);
  m->set_model_dir(model.dir());
  m->set_model_name(backend.model_name);
  m->set_num_layers(static_cast<int32_t>(model.config().num_layers));
  m->set_vocab_size(model.config().vocab_size);

  const engine::Engine& eng = backend.scheduler->engine();
  const engine::EngineOptions& eo = eng.options();
  proto::EngineFingerprint* e = header->mutable_engine();
  e->set_version(TRACE_VERSION);
  e->set_git_revision(TRACE_GIT_REVISION);
  e->set_compiler(TRACE_COMPILER);
#ifdef TRACE_BUILD_TYPE
  e->set_build_type(TRACE_BUILD_TYPE);
#endif
  e->set_numerics(eo.numerics == kernels::Numerics::kCanonical ? kernels::kNumericsVersion
                                                               : "fast");
  e->set_kernel_impl(eo.impl == kernels::Impl::kReference ? "reference" : "auto");
  e->set_threads(eo.threads > 0 ? eo.threads
                                : static_cast<int32_t>(std::thread::hardware_concurrency()));
  e->set_max_context(eo.max_context > 0 ? eo.max_context : model.config().max_position_embeddings);

  proto::DeviceFingerprint* d = header->mutable_device();
  d->set_device(eo.device);
  d->set_description(eng.DeviceDescription());
  d->set_cpu_model(ReadCpuModel());
  for (const std::string& f : ReadCpuFlags()) d->add_cpu_flags(f);
  d->set_cpu_cores(static_cast<int32_t>(std::thread::hardware_concurrency()));
  struct utsname u {};
  if (uname(&u) == 0) {
    d->set_os(std::string(u.sysname) + " " + u.release + " " + u.machine);
  }
}

}  // namespace trace::recorder
