// Test fixture shared by the CUDA parity tests: a CPU and a CUDA backend, host/device tensor helpers, and the error
// measure (max |cuda - cpu| / max |cpu| over an output) with the tolerances stated per op family.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace rs::cuda_test {

// Tolerances (normalised max error, see above).
constexpr double kExact = 0.0;           // copies and gathers; f32 add
constexpr double kElementwise = 2e-6;    // expf/sqrtf/fma contraction differences (rms_norm, rope, silu, glu)
constexpr double kF32Dot = 1e-5;         // f32 dot products of exact (decoded) weights in another summation order
constexpr double kBf16Split = 5e-5;      // cuBLAS on bf16(x) + bf16(x - bf16(x)): x kept to ~2^-17 relative
constexpr double kAttention = 1e-5;      // online softmax vs two-pass
constexpr double kAttentionBf16 = 4e-3;  // bf16 cache: q and probabilities rounded to bf16 (2^-9) at different maxima
constexpr double kMoe = 2e-5;            // two chained linears + GLU
constexpr double kBf16Fast = 4e-3;       // activations rounded to bf16 (2^-9 relative) before a bf16 GEMM

class CudaParity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::cuda_device_count() == 0) {
      if (std::getenv("RS_REQUIRE_CUDA")) FAIL() << "RS_REQUIRE_CUDA is set but no CUDA device is visible";
      GTEST_SKIP() << "no CUDA device";
    }
    cpu_ = make_backend("cpu", BackendOptions{.num_threads = 2, .exact_f32 = true});  // f32 reference numerics
    gpu_ = make_backend("cuda", BackendOptions{.exact_f32 = true});  // hi/lo-split GEMMs: near-f32 products
    fast_ = make_backend("cuda");  // the serving path: activations rounded to bf16 in bf16 GEMMs
  }

  // Host tensor over a vector this fixture keeps alive.
  template <typename T>
  Tensor host(std::vector<T> values, DType dtype, std::initializer_list<int64_t> shape) {
    auto& bytes = host_.emplace_back(values.size() * sizeof(T));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return Tensor(bytes.data(), dtype, shape);
  }
  Tensor host_zeros(DType dtype, std::initializer_list<int64_t> shape) {
    Tensor probe(nullptr, dtype, shape);
    auto& bytes = host_.emplace_back(probe.bytes());
    return Tensor(bytes.data(), dtype, shape);
  }
  // Device copy of a host tensor, complete on return: fast_ runs on its own stream, and an asynchronous copy from
  // pageable memory may still be in flight when a kernel there reads it (seen as stale sink logits on an H200).
  Tensor dev(const Tensor& h) {
    if (h.empty()) return h;
    int64_t shape[Tensor::kMaxDims];
    for (int i = 0; i < h.ndim(); ++i) shape[i] = h.dim(i);
    Buffer& b = device_.emplace_back(gpu_->alloc(h.bytes()));
    Tensor d(b.data(), h.dtype(), shape, h.ndim(), gpu_->device());
    gpu_->copy(d, h);
    gpu_->synchronize();
    return d;
  }
  template <typename T>
  std::vector<T> fetch(const Tensor& d) {
    std::vector<T> out(d.bytes() / sizeof(T));
    gpu_->copy(Tensor(out.data(), d.dtype(), {static_cast<int64_t>(out.size())}), d.view({d.numel()}));
    gpu_->synchronize();
    return out;
  }
  static std::vector<float> as_floats(const Tensor& h) {
    return std::vector<float>(h.data_as<float>(), h.data_as<float>() + h.numel());
  }
  LinearWeight dev_weight(const LinearWeight& w) {
    LinearWeight d = w;
    d.weight = gpu_->upload_weight(w.weight, weights_);
    if (!w.scales.empty()) d.scales = gpu_->upload_weight(w.scales, weights_);
    return d;
  }

  std::unique_ptr<Backend> cpu_, gpu_, fast_;
  std::vector<std::vector<uint8_t>> host_;
  std::vector<Buffer> device_, weights_;
  std::mt19937 rng_{1234};
};

inline std::vector<float> normal(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

inline std::vector<uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_f16(v[i]);
  return out;
}

inline double normalized_error(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(ref[i])) return INFINITY;
    max_diff = std::max(max_diff, std::abs(double(got[i]) - ref[i]));
    max_ref = std::max(max_ref, std::abs(double(ref[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

#define EXPECT_PARITY(got, ref, tol, what)                                                      \
  do {                                                                                          \
    const double err_ = normalized_error(got, ref);                                             \
    std::printf("  %-48s err %.2e (tol %.0e)\n", std::string(what).c_str(), err_, double(tol)); \
    EXPECT_LE(err_, tol) << (what);                                                             \
  } while (0)

}  // namespace rs::cuda_test
