// FillFingerprints (recorder/server.h): the model, engine and device facts of a run
// header, so that replay and diff can say what changed between then and now; its model part
// is FillModelFingerprint (recorder/server/fingerprint.h). The device facts come from
// engine::DescribeEngineDevice (engine/fingerprint.h), the same that `trace doctor` prints.
#include <string>

#include "base/build_info.h"
#include "base/hash.h"
#include "engine/fingerprint.h"
#include "recorder/server.h"
#include "recorder/server/fingerprint.h"

namespace trace::recorder {

void FillModelFingerprint(const engine::Model& model, proto::ModelFingerprint* m) {
  const engine::ModelFingerprint& fp = model.fingerprint();
  m->set_architecture(fp.architecture);
  m->set_dtype(fp.dtype);
  m->set_parameter_count(fp.parameter_count);
  m->set_weights_sha256(fp.weights_sha256);
  m->set_config_sha256(fp.config_sha256);
  m->set_tokenizer_sha256(fp.tokenizer_sha256);
  m->set_chat_template_sha256(fp.chat_template_sha256);
  m->set_model_dir(model.dir());
  m->set_num_layers(static_cast<int32_t>(model.config().num_layers));
  m->set_vocab_size(model.config().vocab_size);
}

void FillFingerprints(const LocalBackend& backend, proto::RunHeader* header) {
  const engine::Model& model = *backend.model;
  proto::ModelFingerprint* m = header->mutable_model();
  FillModelFingerprint(model, m);
  // No template in the model's files: the hash of the one the server renders with.
  if (model.fingerprint().chat_template_sha256.empty() && backend.chat_template != nullptr) {
    m->set_chat_template_sha256(Sha256Hex(backend.chat_template->source()));
  }
  m->set_model_name(backend.model_name);

  const engine::Engine& eng = backend.scheduler->engine();
  const engine::EngineOptions& eo = eng.options();
  proto::EngineFingerprint* e = header->mutable_engine();
  e->set_version(TRACE_VERSION);
  e->set_git_revision(TRACE_GIT_REVISION);
  e->set_compiler(TRACE_COMPILER);
#ifdef TRACE_BUILD_TYPE
  e->set_build_type(TRACE_BUILD_TYPE);
#endif
  e->set_numerics(kernels::VersionedNumericsName(eo.numerics));
  const engine::EngineDeviceFingerprint dev = engine::DescribeEngineDevice(eng);
  e->set_kernel_impl(dev.kernel_path);
  // The engine's options are the values it runs with (engine.h): no 0 for "the default" left.
  e->set_threads(eo.threads);
  e->set_max_context(eo.max_context);

  proto::DeviceFingerprint* d = header->mutable_device();
  d->set_device(dev.device);
  d->set_description(dev.description);
  d->set_cpu_model(dev.cpu_model);
  for (const std::string& f : dev.cpu_flags) d->add_cpu_flags(f);
  d->set_cpu_cores(dev.cpu_cores);
  d->set_os(dev.os);
  d->set_gpu_name(dev.gpu_name);
  d->set_gpu_compute_capability(dev.gpu_compute_capability);
  d->set_gpu_driver_version(dev.gpu_driver_version);
  d->set_cuda_runtime_version(dev.cuda_runtime_version);
  d->set_cublas_version(dev.cublas_version);
  d->set_gpu_memory_bytes(dev.gpu_memory_bytes);
}

}  // namespace trace::recorder
