#include "kernels/cuda/device.h"

#include <cstdio>
#include <utility>

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
