#include "kernels/cuda/device.h"

#include <dlfcn.h>

#include <cstdio>
#include <utility>

#include "kernels/cuda/cublas_loader.h"
#include "kernels/cuda/cuda_check.h"

namespace trace::kernels::cuda {

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later calls see a clean state
    return 0;
  }
  return count;
}

Result<std::string> CudaDeviceDescription(int ordinal) {
  TRACE_RETURN_IF_ERROR(UseCudaDevice(ordinal));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  char buf[640];
  std::snprintf(buf, sizeof(buf), "%s (sm_%d%d, %d SMs, %.1f GiB)", prop.name, prop.major,
                prop.minor, prop.multiProcessorCount,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(buf);
}

namespace {

std::string CudaVersionString(int version) {  // 13000 -> "13.0"
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The NVIDIA driver release through NVML, loaded at run time: a machine without a driver
// must still run this binary.
std::string NvmlDriverRelease() {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return "";
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned int);
  auto init = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlInit_v2"));
  auto version = reinterpret_cast<VersionFn>(dlsym(nvml, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlShutdown"));
  std::string release;
  if (init != nullptr && version != nullptr && init() == 0) {
    char buf[96] = {};
    if (version(buf, sizeof(buf)) == 0) release = buf;
    if (shutdown != nullptr) shutdown();
  }
  dlclose(nvml);
  return release;
}

}  // namespace

kernels::CudaStack ReadCudaStack() {
  kernels::CudaStack stack;
  stack.backend_built = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    stack.runtime_version = CudaVersionString(runtime);
  }
  // Loads cuBLAS (cublas_loader.h) if nothing has yet: the version is what it reports.
  Result<const CublasApi*> cublas = Cublas();
  if (cublas.ok()) {
    stack.cublas_version = (*cublas)->version;
  } else {
    stack.cublas_error = cublas.status().message();
  }
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    stack.driver_cuda = CudaVersionString(driver);
  }
  stack.driver_release = NvmlDriverRelease();
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    stack.error = std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
    return stack;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    kernels::CudaDeviceInfo d;
    d.ordinal = i;
    d.name = prop.name;
    d.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    d.sm_count = prop.multiProcessorCount;
    d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    stack.devices.push_back(d);
  }
  return stack;
}

Status UseCudaDevice(int ordinal) {
  const int count = CudaDeviceCount();
  if (count == 0) return Unavailable("no CUDA device is present");
  if (ordinal < 0 || ordinal >= count) {
    return InvalidArgument("CUDA device cuda:" + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(count) + " device(s) present)");
  }
  CUDA_CHECK(cudaSetDevice(ordinal));
  return Status::Ok();
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Result<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes, const std::string& what) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  cudaError_t err = cudaMalloc(&buffer.data_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return CudaError(err,
                     ("cudaMalloc(" + std::to_string(bytes) + " bytes for " + what + ")").c_str(),
                     __FILE__, __LINE__);
  }
  buffer.bytes_ = bytes;
  return buffer;
}

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Result<Stream> Stream::Create() {
  Stream stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream.stream_, cudaStreamNonBlocking));
  return stream;
}

Status Stream::Synchronize() const {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

Status CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return Status::Ok();
}

Status CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::Ok();
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
  return Status::Ok();
}

Status CopyToHostAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::Ok();
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

Status CopyDeviceToDeviceAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::Ok();
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  return Status::Ok();
}

Status CheckLastLaunch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return CudaError(err, what, __FILE__, __LINE__);
  return Status::Ok();
}

}  // namespace trace::kernels::cuda
