#include "kernels/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "base/escape.h"

namespace trace::kernels::cuda {

namespace {

// cublas_v2.h maps the public names to versioned symbols (cublasCreate -> cublasCreate_v2);
// stringifying the macro's expansion gives the symbol the headers meant.
#define TRACE_CUBLAS_SYMBOL_NAME2(name) #name
#define TRACE_CUBLAS_SYMBOL_NAME(name) TRACE_CUBLAS_SYMBOL_NAME2(name)

// dlerror's text as a message may hold it: one line, control bytes escaped (base/escape.h).
std::string OneLine(const char* text) {
  return text == nullptr ? "unknown error" : EscapeForDisplay(text);
}

Status LoadError(const std::string& reason) {
  const std::string major = std::to_string(CublasBuildMajor());
  return Unavailable("cuBLAS " + major + " could not be loaded (" + reason +
                     "): install the CUDA " + major + " libraries or use --device cpu");
}

template <typename Fn>
bool Resolve(void* handle, const char* symbol, Fn* out, std::string* error) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (p == nullptr) {
    *error = std::string("no symbol ") + symbol + ": " + OneLine(dlerror());
    return false;
  }
  *out = reinterpret_cast<Fn>(p);
  return true;
}

// Opens one library and fills `api`, or says why not in `error` (without the advice).
bool TryLoad(const std::string& library, CublasApi* api, std::string* error) {
  // RTLD_LOCAL: cuBLAS's symbols stay out of the global namespace; RTLD_NOW: a broken
  // install fails here, not at the first GEMM.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *error = OneLine(dlerror());
    return false;
  }
  std::string why;
  const bool ok =
      Resolve(handle, TRACE_CUBLAS_SYMBOL_NAME(cublasCreate), &api->Create, &why) &&
      Resolve(handle, TRACE_CUBLAS_SYMBOL_NAME(cublasDestroy), &api->Destroy, &why) &&
      Resolve(handle, TRACE_CUBLAS_SYMBOL_NAME(cublasSetStream), &api->SetStream, &why) &&
      Resolve(handle, TRACE_CUBLAS_SYMBOL_NAME(cublasSetWorkspace), &api->SetWorkspace, &why) &&
      Resolve(handle, "cublasGemmEx", &api->GemmEx, &why) &&
      Resolve(handle, TRACE_CUBLAS_SYMBOL_NAME(cublasGetProperty), &api->GetProperty, &why) &&
      Resolve(handle, "cublasGetStatusName", &api->GetStatusName, &why) &&
      Resolve(handle, "cublasGetStatusString", &api->GetStatusString, &why);
  if (!ok) {
    *error = library + ": " + why;
    dlclose(handle);
    return false;
  }
  int major = 0, minor = 0, patch = 0;
  if (api->GetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      api->GetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      api->GetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
    *error = library + ": cublasGetProperty failed";
    dlclose(handle);
    return false;
  }
  const std::string version =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  if (major != CublasBuildMajor()) {
    // Another major version breaks the ABI the headers describe.
    *error = library + " is cuBLAS " + version;
    dlclose(handle);
    return false;
  }
  api->library = library;
  api->version = version;
  return true;  // the handle is never closed: the function pointers point into it
}

}  // namespace

int CublasBuildMajor() {
  return CUBLAS_VER_MAJOR;
}

std::vector<std::string> DefaultCublasLibraries() {
  return {"libcublas.so." + std::to_string(CublasBuildMajor()), "libcublas.so"};
}

Result<CublasApi> LoadCublas(const std::vector<std::string>& libraries) {
  std::string first_error;
  for (const std::string& library : libraries) {
    CublasApi api;
    std::string error;
    if (TryLoad(library, &api, &error)) return api;
    if (first_error.empty()) first_error = error;
  }
  return LoadError(libraries.empty() ? "no library name given" : first_error);
}

Result<const CublasApi*> Cublas() {
  static std::once_flag once;
  static Result<CublasApi>* loaded = nullptr;  // never freed: handles may outlive statics
  std::call_once(once,
                 [] { loaded = new Result<CublasApi>(LoadCublas(DefaultCublasLibraries())); });
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

const CublasApi& LoadedCublas() {
  Result<const CublasApi*> api = Cublas();
  if (!api.ok()) {
    std::fprintf(stderr, "trace: cuBLAS used before it was loaded: %s\n",
                 api.status().ToString().c_str());
    std::abort();  // a cuBLAS handle exists only after Cublas() succeeded
  }
  return **api;
}

Status CublasError(cublasStatus_t status, const char* call, const char* file, int line) {
  // A cuBLAS call returned `status`, so the library is loaded.
  const CublasApi& api = LoadedCublas();
  return Internal(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  api.GetStatusName(status) + " (" + api.GetStatusString(status) + ")");
}

}  // namespace trace::kernels::cuda
