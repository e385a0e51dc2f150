// cuBLAS, opened with dlopen on first use instead of linked. Only fast numerics' MatMul and
// `trace doctor` (its version) need cuBLAS, and its libraries (libcublas + libcublasLt, about
// 700 MB mapped) would otherwise load with every `trace` command and stop the binary from
// starting at all on a machine without them. Nothing in trace links CUDA::cublas: the
// headers give the types, this loader the functions (docs/cuda.md, "Loading CUDA").
//
// Ownership: the library, once opened, stays loaded for the life of the process (cuBLAS
// handles may outlive any one caller); a CublasApi is a table of function pointers into it.
// Thread safety: Cublas() may be called from any thread; the first call loads, the others
// wait for it (std::call_once) and then share its result. The functions themselves follow
// cuBLAS's own rules (a handle is used by one thread at a time). Errors: a library that
// cannot be opened, or lacks a symbol, or is another major version than the headers built
// against, gives one line naming it, dlerror's reason and what to do; kUnavailable.
#pragma once

#include <cublas_v2.h>  // types, enums and the name macros only: no libcublas symbol is used

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace trace::kernels::cuda {

// The cuBLAS functions trace calls; each field has the signature of the cuBLAS function of
// the same name (cublasCreate is cublasCreate_v2, and so on, as in cublas_v2.h).
struct CublasApi {
  cublasStatus_t (*Create)(cublasHandle_t* handle) = nullptr;
  cublasStatus_t (*Destroy)(cublasHandle_t handle) = nullptr;
  cublasStatus_t (*SetStream)(cublasHandle_t handle, cudaStream_t stream) = nullptr;
  cublasStatus_t (*SetWorkspace)(cublasHandle_t handle, void* workspace,
                                 size_t workspace_bytes) = nullptr;
  cublasStatus_t (*GemmEx)(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const void* alpha,
                           const void* A, cudaDataType Atype, int lda, const void* B,
                           cudaDataType Btype, int ldb, const void* beta, void* C,
                           cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                           cublasGemmAlgo_t algo) = nullptr;
  cublasStatus_t (*GetProperty)(libraryPropertyType type, int* value) = nullptr;
  const char* (*GetStatusName)(cublasStatus_t status) = nullptr;
  const char* (*GetStatusString)(cublasStatus_t status) = nullptr;

  std::string library;  // the name that was opened ("libcublas.so.13")
  std::string version;  // "13.1.0", from GetProperty
};

// The major version of the cuBLAS headers this build compiled against (CUBLAS_VER_MAJOR).
int CublasBuildMajor();

// The names tried, in order: "libcublas.so.<CublasBuildMajor()>", then "libcublas.so" (a
// toolkit whose versioned name is not on the search path; accepted only when its major
// version matches).
std::vector<std::string> DefaultCublasLibraries();

// The process's cuBLAS, opened from DefaultCublasLibraries() on the first call. The result,
// success or failure, is kept: later calls return it without trying again.
Result<const CublasApi*> Cublas();

// For callers that hold a cuBLAS handle (so Cublas() has succeeded): the loaded table.
// Aborts with a message if cuBLAS was never loaded, which would be a bug in trace.
const CublasApi& LoadedCublas();

// Opens the first of `libraries` (names searched like dlopen's, or paths) that loads, has
// every symbol and has the build's major version. Not cached: each call dlopens again (the
// loader counts references, so a library already open is not loaded twice). Cublas() uses
// it; tests call it with other names. When none loads, the error quotes the first name's
// reason: "cuBLAS 13 could not be loaded (libcublas.so.13: cannot open shared object file:
// No such file or directory): install the CUDA 13 libraries or use --device cpu".
Result<CublasApi> LoadCublas(const std::vector<std::string>& libraries);

// A failed cuBLAS call as a Status naming the call, the file and the line (CUBLAS_CHECK).
Status CublasError(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace trace::kernels::cuda
