// DeviceContext: stream, cuBLAS handle, pooled memory settings, the device error word and scratch for one CUDA device.
#include "backend/cuda/device_context.cuh"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/fp8_gemm.cuh"

namespace rs::cuda {

DeviceContext::DeviceContext(int index, bool exact_f32) : index_(index), exact_f32_(exact_f32) {
  int count = 0;
  RS_CUDA_CHECK(cudaGetDeviceCount(&count));
  RS_CHECK(index >= 0 && index < count, "CUDA device {} requested but {} present", index, count);
  RS_CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp prop{};
  RS_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  num_sms_ = prop.multiProcessorCount;
  compute_major_ = prop.major;
  device_name_ = prop.name;
  total_memory_ = prop.totalGlobalMem;
  RS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RS_CUBLAS_CHECK(cublasCreate(&cublas_));
  RS_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // cuBLAS gets a fixed workspace so that it never allocates (graph capture forbids it); 32 MiB covers Hopper's GEMMs.
  RS_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes));
  RS_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
  // Full fp32 (no TF32) for f32 GEMMs: activations are f32 and the CPU reference is exact fp32.
  RS_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  // Keep freed stream-ordered memory in the pool: per-step staging buffers are then reused without cudaMalloc.
  cudaMemPool_t pool;
  RS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index));
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  RS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  RS_CUDA_CHECK(cudaMalloc(&error_flags_, sizeof(uint32_t)));
  RS_CUDA_CHECK(cudaMemset(error_flags_, 0, sizeof(uint32_t)));
  RS_CUDA_CHECK(cudaMallocHost(&error_flags_host_, sizeof(uint32_t)));
  *error_flags_host_ = 0;
  RS_CUDA_CHECK(cudaMalloc(&split_counters_, kSplitCounters * sizeof(uint32_t)));
  RS_CUDA_CHECK(cudaMemset(split_counters_, 0, kSplitCounters * sizeof(uint32_t)));
}

Fp8Gemm& DeviceContext::fp8_gemm() {
  if (!fp8_gemm_) fp8_gemm_ = std::make_unique<Fp8Gemm>(*this);
  return *fp8_gemm_;
}

DeviceContext::~DeviceContext() {
  // Destructors must not throw: failures here are ignored (the process is tearing the device down anyway).
  (void)cudaSetDevice(index_);
  (void)cudaStreamSynchronize(stream_);
  for (void* p : scratch_)
    if (p) (void)cudaFree(p);
  for (auto& [key, table] : expert_tables_) (void)cudaFree(table.device);
  (void)cudaFree(error_flags_);
  (void)cudaFreeHost(error_flags_host_);
  (void)cudaFree(split_counters_);
  if (cublas_) (void)cublasDestroy(cublas_);
  if (cublas_workspace_) (void)cudaFree(cublas_workspace_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

void DeviceContext::activate() const {
  thread_local int current = -1;
  if (current != index_) {
    RS_CUDA_CHECK(cudaSetDevice(index_));
    current = index_;
  }
}

void DeviceContext::synchronize_and_check() {
  activate();
  RS_CUDA_CHECK(cudaMemcpyAsync(error_flags_host_, error_flags_, sizeof(uint32_t), cudaMemcpyDeviceToHost, stream_));
  RS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const uint32_t flags = *error_flags_host_;
  if (flags == 0) return;
  *error_flags_host_ = 0;
  RS_CUDA_CHECK(cudaMemsetAsync(error_flags_, 0, sizeof(uint32_t), stream_));
  std::string what;
  const auto note = [&](uint32_t bit, const char* text) {
    if (flags & bit) what += what.empty() ? text : fmt::format("; {}", text);
  };
  note(kErrTokenId, "token id outside the vocabulary");
  note(kErrPosition, "position beyond the RoPE table");
  note(kErrKvSlot, "KV slot beyond the cache");
  note(kErrExpertId, "expert id out of range");
  note(kErrAbsentPage, "attention read an absent KV page");
  RS_FAIL("CUDA kernels rejected their input since the last synchronize: {}", what);
}

void* DeviceContext::scratch(ScratchSlot slot, size_t bytes) {
  const auto i = static_cast<size_t>(slot);
  if (bytes > scratch_bytes_[i]) {
    RS_CHECK(!capturing_,
             "scratch slot {} must grow to {} bytes while a graph is recorded (run the step eagerly first)", i, bytes);
    activate();
    // Sampling runs outside recorded graphs: its scratch moving does not invalidate them.
    if (slot != ScratchSlot::kSample) ++scratch_epoch_;
    const size_t grown = std::max(bytes, scratch_bytes_[i] + scratch_bytes_[i] / 4);
    if (scratch_[i]) RS_CUDA_CHECK(cudaFreeAsync(scratch_[i], stream_));
    scratch_[i] = nullptr;
    scratch_bytes_[i] = 0;  // a failed allocation below leaves the slot empty, not pointing at freed memory
    RS_CUDA_ALLOC_CHECK(cudaMallocAsync(&scratch_[i], grown, stream_), grown);
    scratch_bytes_[i] = grown;
  }
  return scratch_[i];
}

ExpertTable DeviceContext::expert_table(const std::vector<LinearWeight>& experts) {
  RS_CHECK(!experts.empty(), "empty expert list");
  std::vector<const void*> host;
  host.reserve(2 * experts.size());
  for (const auto& w : experts) host.push_back(w.weight.data());
  for (const auto& w : experts) host.push_back(w.scales.data());
  CachedTable& table = expert_tables_[host.front()];
  if (table.host != host) {
    RS_CHECK(!capturing_, "MoE expert table built while a graph is recorded (run the step eagerly first)");
    for (const auto& w : experts)
      RS_CHECK(reinterpret_cast<uintptr_t>(w.weight.data()) % 16 == 0, "expert weight not 16-byte aligned");
    activate();
    if (table.device) RS_CUDA_CHECK(cudaFreeAsync(table.device, stream_));
    table.device = nullptr;  // a failed allocation below leaves no freed pointer behind
    table.host.clear();
    RS_CUDA_ALLOC_CHECK(cudaMallocAsync(&table.device, host.size() * sizeof(void*), stream_),
                        host.size() * sizeof(void*));
    // The pageable source is staged by the copy itself, so `host` may change right after.
    RS_CUDA_CHECK(
        cudaMemcpyAsync(table.device, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice, stream_));
    table.host = std::move(host);
  }
  auto* pointers = static_cast<const void* const*>(table.device);
  return ExpertTable{pointers, reinterpret_cast<const uint8_t* const*>(pointers + experts.size())};
}

ElemType elem_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ElemType::kF32;
    case DType::kBF16: return ElemType::kBF16;
    case DType::kF16: return ElemType::kF16;
    default: RS_FAIL("CUDA kernels cannot read {} values as floats", dtype_name(dtype));
  }
}

}  // namespace rs::cuda
