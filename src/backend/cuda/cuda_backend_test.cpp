// Parity of the CUDA memory, elementwise, norm and RoPE ops with the CPU reference backend on random inputs.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

TEST_F(CudaParity, AllocIsZeroedAndCopiesRoundTrip) {
  Buffer b = gpu_->alloc(4096);
  Tensor d(b.data(), DType::kF32, {1024}, gpu_->device());
  EXPECT_EQ(fetch<float>(d), std::vector<float>(1024, 0.0f));
  const auto v = normal(rng_, 1024);
  gpu_->copy(d, host(v, DType::kF32, {1024}));
  EXPECT_EQ(fetch<float>(d), v);
}

TEST_F(CudaParity, Embedding) {
  const int64_t vocab = 300, hidden = 96, tokens = 17;
  std::vector<int32_t> ids(tokens);
  for (auto& id : ids) id = static_cast<int32_t>(rng_() % vocab);
  const auto table = normal(rng_, vocab * hidden);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor t =
        dtype == DType::kF32 ? host(table, dtype, {vocab, hidden}) : host(to_bf16(table), dtype, {vocab, hidden});
    const Tensor ids_h = host(ids, DType::kI32, {tokens});
    Tensor ref = host_zeros(DType::kF32, {tokens, hidden});
    cpu_->embedding(t, ids_h, ref);
    Tensor out = dev(host_zeros(DType::kF32, {tokens, hidden}));
    gpu_->embedding(dev(t), dev(ids_h), out);
    EXPECT_PARITY(fetch<float>(out), as_floats(ref), kExact, fmt::format("embedding {}", dtype_name(dtype)));
  }
}

TEST_F(CudaParity, BadTokenIdThrowsAtSynchronize) {
  const Tensor table = dev(host(normal(rng_, 8 * 4), DType::kF32, {8, 4}));
  Tensor out = dev(host_zeros(DType::kF32, {1, 4}));
  gpu_->embedding(table, dev(host(std::vector<int32_t>{8}, DType::kI32, {1})), out);
  EXPECT_THROW(gpu_->synchronize(), Error);
  EXPECT_NO_THROW(gpu_->synchronize());  // the flag is cleared once reported
}

TEST_F(CudaParity, RmsNormAddSiluGather) {
  for (int64_t width : {64, 2880}) {
    const int64_t rows = 13;
    const auto x = normal(rng_, rows * width, 3.0f);
    const auto w = normal(rng_, width);
    for (bool add_one : {false, true}) {
      for (DType wtype : {DType::kF32, DType::kBF16}) {
        const Tensor xh = host(x, DType::kF32, {rows, width});
        const Tensor wh = wtype == DType::kF32 ? host(w, wtype, {width}) : host(to_bf16(w), wtype, {width});
        Tensor ref = host_zeros(DType::kF32, {rows, width});
        cpu_->rms_norm(xh, wh, 1e-6f, add_one, ref);
        Tensor xd = dev(xh);
        gpu_->rms_norm(xd, dev(wh), 1e-6f, add_one, xd);  // in place, as the model does for q/k norms
        EXPECT_PARITY(fetch<float>(xd), as_floats(ref), kElementwise,
                      fmt::format("rms_norm width {} add_one {} {}", width, add_one, dtype_name(wtype)));
      }
    }
  }
  for (int64_t count : {1001, 4096}) {
    const Tensor a = host(normal(rng_, count), DType::kF32, {count}),
                 b = host(normal(rng_, count), DType::kF32, {count});
    Tensor ref = host_zeros(DType::kF32, {count});
    cpu_->add(a, b, ref);
    Tensor ad = dev(a);
    gpu_->add(ad, dev(b), ad);
    EXPECT_PARITY(fetch<float>(ad), as_floats(ref), kExact, fmt::format("add {}", count));
  }
  const int64_t rows = 9, inter = 300;
  const Tensor gate_up = host(normal(rng_, rows * 2 * inter, 4.0f), DType::kF32, {rows, 2 * inter});
  Tensor ref = host_zeros(DType::kF32, {rows, inter});
  cpu_->silu_mul(gate_up, ref);
  Tensor out = dev(host_zeros(DType::kF32, {rows, inter}));
  gpu_->silu_mul(dev(gate_up), out);
  EXPECT_PARITY(fetch<float>(out), as_floats(ref), kElementwise, "silu_mul");
  const Tensor picks = host(std::vector<int32_t>{8, 0, 3, 3}, DType::kI32, {4});
  Tensor gathered_ref = host_zeros(DType::kF32, {4, 2 * inter});
  cpu_->gather_rows(gate_up, picks, gathered_ref);
  Tensor gathered = dev(host_zeros(DType::kF32, {4, 2 * inter}));
  gpu_->gather_rows(dev(gate_up), dev(picks), gathered);
  EXPECT_PARITY(fetch<float>(gathered), as_floats(gathered_ref), kExact, "gather_rows");
  // scatter_rows (EAGLE-3 feature capture): rows into a column block of a wider table, negative rows skipped.
  const Tensor targets = host(std::vector<int32_t>{5, -1, 0, 2}, DType::kI32, {4});
  const Tensor table = host(normal(rng_, 7 * 3 * inter), DType::kF32, {7, 3 * inter});
  Tensor scattered_ref = host(as_floats(table), DType::kF32, {7, 3 * inter});
  cpu_->scatter_rows(gathered_ref, targets, scattered_ref, inter);
  Tensor scattered = dev(table);
  gpu_->scatter_rows(gathered, dev(targets), scattered, inter);
  EXPECT_PARITY(fetch<float>(scattered), as_floats(scattered_ref), kExact, "scatter_rows");
}

TEST_F(CudaParity, Rope) {
  const int64_t tokens = 7, heads = 5, hd = 64, max_pos = 50;
  for (int32_t rotary : {64, 32}) {
    const Tensor table = host(normal(rng_, max_pos * rotary), DType::kF32, {max_pos, rotary});
    std::vector<int32_t> pos(tokens);
    for (auto& p : pos) p = static_cast<int32_t>(rng_() % max_pos);
    const Tensor ph = host(pos, DType::kI32, {tokens});
    Tensor x = host(normal(rng_, tokens * heads * hd), DType::kF32, {tokens, heads, hd});
    Tensor xd = dev(x);
    cpu_->rope(x, ph, table, rotary);
    gpu_->rope(xd, dev(ph), dev(table), rotary);
    EXPECT_PARITY(fetch<float>(xd), as_floats(x), kElementwise, fmt::format("rope rotary {}", rotary));
  }
}

}  // namespace
}  // namespace rs::cuda_test
