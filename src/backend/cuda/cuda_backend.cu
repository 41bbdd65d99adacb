// CudaBackend: the Backend on one CUDA device. One stream orders all work; memory comes from the stream-ordered pool
// (alloc) or plain cudaMalloc (weights); ops validate shapes on the host and launch kernels from kernels/*.cu.
#include "backend/cuda/cuda_backend.h"

#include <bit>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/device_context.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "base/log.h"
#include "base/thread_pool.h"

namespace rs::cuda {
namespace {

static_assert(kSampleMaxTop == kMaxTopLogprobs, "CUDA sampling reports as many top logprobs as the API allows");

// Grow-only pinned host memory (asynchronous copies need it); freed with the backend.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (data_) (void)cudaFreeHost(data_);
  }
  void* reserve(size_t bytes) {
    if (bytes > bytes_) {
      if (data_) RS_CUDA_CHECK(cudaFreeHost(data_));
      data_ = nullptr;
      bytes_ = 0;  // a failed allocation below leaves the buffer empty, not a null pointer with the old size
      RS_CUDA_ALLOC_CHECK(cudaMallocHost(&data_, bytes), bytes);
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// One instantiated CUDA graph, replayed on the context's stream.
class CudaGraph final : public BackendGraph {
 public:
  CudaGraph(std::shared_ptr<DeviceContext> ctx, cudaGraphExec_t exec) : ctx_(std::move(ctx)), exec_(exec) {}
  ~CudaGraph() override {
    ctx_->activate();
    (void)cudaGraphExecDestroy(exec_);
  }
  void replay() override {
    ctx_->activate();
    RS_CUDA_CHECK(cudaGraphLaunch(exec_, ctx_->stream()));
  }

 private:
  std::shared_ptr<DeviceContext> ctx_;
  cudaGraphExec_t exec_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int index, const BackendOptions& options)
      : ctx_(std::make_shared<DeviceContext>(index, options.exact_f32)) {
    // Deterministic: one GEMM kernel for every row count (no GEMV / cuBLAS switch, no split-K), one attention tile
    // shape without key splits, the recurrent delta rule for every step (linear.cu, flash_attention.cu).
    ctx_->set_batch_invariant(options.deterministic);
    const std::string& attention = options.attention;
    RS_CHECK(attention == "auto" || attention == "flash" || attention == "cuda-core",
             "unknown attention backend '{}' (auto, flash, cuda-core)", attention);
    flash_ = attention != "cuda-core";  // auto: tensor cores wherever they apply (measured faster everywhere)
    set_programmatic_launch(options.programmatic_launch && ctx_->compute_major() >= 9);
  }

  Device device() const override { return Device{DeviceKind::kCuda, ctx_->index()}; }
  std::string name() const override {
    return fmt::format("cuda:{} ({}, {} SMs, {:.0f} GiB)", ctx_->index(), ctx_->device_name(), ctx_->num_sms(),
                       ctx_->total_memory() / double(1 << 30));
  }

  Buffer alloc(size_t bytes) override {
    if (bytes == 0) return Buffer(nullptr, 0, device(), {});
    ctx_->activate();
    void* data = nullptr;
    RS_CUDA_ALLOC_CHECK(cudaMallocAsync(&data, bytes, ctx_->stream()), bytes);
    RS_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, ctx_->stream()));
    // The deleter keeps the context (and its stream) alive; the free is ordered after all work already enqueued.
    return Buffer(data, bytes, device(), [ctx = ctx_](void* p) {
      ctx->activate();
      (void)cudaFreeAsync(p, ctx->stream());
    });
  }

  void copy(Tensor dst, const Tensor& src) override {
    RS_CHECK(dst.bytes() == src.bytes(), "copy of {} bytes into {} bytes", src.bytes(), dst.bytes());
    if (src.bytes() == 0) return;
    ctx_->activate();
    // Pageable host memory is staged by the runtime: the host side may be reused as soon as this returns (H2D), and a
    // D2H copy into pageable memory has completed on return.
    RS_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDefault, ctx_->stream()));
  }

  void synchronize() override { ctx_->synchronize_and_check(); }

  Buffer alloc_host(size_t bytes) override {
    if (bytes == 0) return Buffer(nullptr, 0, Device{}, {});
    ctx_->activate();
    void* data = nullptr;
    RS_CUDA_ALLOC_CHECK(cudaMallocHost(&data, bytes), bytes);
    std::memset(data, 0, bytes);
    return Buffer(data, bytes, Device{}, [ctx = ctx_](void* p) {
      ctx->activate();
      (void)cudaStreamSynchronize(ctx->stream());  // a copy may still read it
      (void)cudaFreeHost(p);
    });
  }

  MemoryInfo memory_info() const override {
    ctx_->activate();
    MemoryInfo info;
    RS_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
    return info;
  }

  bool supports_graphs() const override { return true; }
  std::unique_ptr<BackendGraph> capture(const std::function<void()>& enqueue) override {
    ctx_->activate();
    RS_CUDA_CHECK(cudaStreamBeginCapture(ctx_->stream(), cudaStreamCaptureModeThreadLocal));
    ctx_->set_capturing(true);
    cudaGraph_t graph = nullptr;
    try {
      enqueue();
    } catch (...) {
      ctx_->set_capturing(false);
      (void)cudaStreamEndCapture(ctx_->stream(), &graph);
      if (graph) (void)cudaGraphDestroy(graph);
      throw;
    }
    ctx_->set_capturing(false);
    RS_CUDA_CHECK(cudaStreamEndCapture(ctx_->stream(), &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    RS_CUDA_CHECK(status);
    return std::make_unique<CudaGraph>(ctx_, exec);
  }

  uint64_t memory_epoch() const override { return ctx_->scratch_epoch(); }

  // bf16 exactly where run_linear hands a bf16 weight's rows to cuBLAS on x rounded once to bf16 (linear.cu).
  DType linear_input_dtype(int64_t rows) const override {
    return !ctx_->exact_f32() && !ctx_->batch_invariant() && rows > kGemvFastMaxRows ? DType::kBF16 : DType::kF32;
  }

  Tensor upload_weight(const Tensor& host, std::vector<Buffer>& keep_alive) override {
    if (host.empty() || host.bytes() == 0) return host;
    ctx_->activate();
    void* data = nullptr;
    RS_CUDA_ALLOC_CHECK(cudaMalloc(&data, host.bytes()), host.bytes());
    keep_alive.emplace_back(data, host.bytes(), device(), [ctx = ctx_](void* p) {
      ctx->activate();
      (void)cudaFree(p);
    });
    RS_CUDA_CHECK(cudaMemcpyAsync(data, host.data(), host.bytes(), cudaMemcpyDefault, ctx_->stream()));
    int64_t shape[Tensor::kMaxDims];
    for (int i = 0; i < host.ndim(); ++i) shape[i] = host.dim(i);
    return Tensor(data, host.dtype(), shape, host.ndim(), device());
  }

  // An FP8 or integer weight on the host as a dense f32 or bf16 one: each value (code times scale, plus bias for
  // integers) in f32, rounded once.
  static LinearWeight dequantize_on_host(ThreadPool& pool, const LinearWeight& w, DType dtype,
                                         std::vector<Buffer>& keep_alive) {
    RS_CHECK(w.weight.device().is_cpu() && w.scales.device().is_cpu(), "experts are dequantized before upload");
    const int64_t out = w.out_features, in = w.in_features, cols = w.scales.dim(1);
    keep_alive.push_back(Buffer::host(out * in * dtype_size(dtype)));
    void* data = keep_alive.back().data();
    const uint8_t* codes = w.weight.data_as<uint8_t>();
    const float* scales = w.scales.data_as<float>();
    const bool fp8 = w.format == LinearWeight::Format::kFp8;
    const int64_t row_bytes = fp8 ? in : in * w.bits / 8;
    const uint32_t mask = (1u << w.bits) - 1;
    const int32_t* order = w.input_order.empty() ? nullptr : w.input_order.data_as<int32_t>();
    pool.parallel_for(out, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        for (int64_t i = 0; i < in; ++i) {
          float value;
          if (fp8) {
            value =
                fp8_e4m3_to_f32(codes[r * in + i]) * scales[(r / w.scale_block_rows) * cols + i / w.scale_block_cols];
          } else {
            const float* pair = scales + (r * cols + i / w.scale_block_cols) * 2;
            const int64_t bit = i * w.bits;
            value = pair[0] * static_cast<float>((codes[r * row_bytes + (bit >> 3)] >> (bit & 7)) & mask) + pair[1];
          }
          if (dtype == DType::kF32)
            static_cast<float*>(data)[r * in + (order ? order[i] : i)] = value;  // act-order columns to their inputs
          else
            static_cast<uint16_t*>(data)[r * in + (order ? order[i] : i)] = f32_to_bf16(value);
        }
    });
    return LinearWeight{LinearWeight::Format::kDense, Tensor(data, dtype, {out, in}), Tensor(), out, in};
  }

  // A per-tensor FP8 scale becomes one scale per output channel (the same number in every row): the layout the W8A8
  // GEMM scales by (fp8_gemm.cu), read the same way by the GEMV.
  void prepare_linear(LinearWeight& w, std::vector<Buffer>& keep_alive) override {
    if (w.format == LinearWeight::Format::kAffine && !affine_readable(w) &&
        w.weight.device().kind == DeviceKind::kCuda) {
      // 2-bit codes, or groups that split a 16-byte vector: dequantized once on the device (correct, bf16's speed).
      const DType dtype = ctx_->exact_f32() ? DType::kF32 : DType::kBF16;
      Buffer dense = alloc(static_cast<size_t>(w.out_features * w.in_features) * dtype_size(dtype));
      launch_dequantize_affine(w.weight.data_as<uint8_t>(), w.scales.data_as<float>(), w.bits, w.scale_block_cols,
                               w.out_features, w.in_features, dense.data(), dtype == DType::kF32, false,
                               ctx_->stream());
      synchronize();
      LinearWeight dense_weight{LinearWeight::Format::kDense,
                                Tensor(dense.data(), dtype, {w.out_features, w.in_features}, device()), Tensor(),
                                w.out_features, w.in_features};
      dense_weight.input_order = w.input_order;  // columns stay in the checkpoint's act-order
      w = dense_weight;
      keep_alive.push_back(std::move(dense));
      return;
    }
    // Exact mode's SIMT GEMV reads int4 re-tiled (the fast path's tensor-core GEMV reads the plain layout).
    if (ctx_->exact_f32() && w.format == LinearWeight::Format::kAffine && w.bits == 4 && w.packed.empty() &&
        w.in_features % 1024 == 0 && std::has_single_bit(static_cast<uint64_t>(w.scale_block_cols)) &&
        w.weight.device().kind == DeviceKind::kCuda) {
      // int4 codes re-tiled in place for the GEMV (launch_tile_int4); `packed` aliases `weight` to say so.
      Buffer tiled = alloc(w.weight.bytes());
      launch_tile_int4(w.weight.data_as<uint8_t>(), w.out_features, w.in_features, static_cast<uint8_t*>(tiled.data()),
                       ctx_->stream());
      RS_CUDA_CHECK(
          cudaMemcpyAsync(w.weight.data(), tiled.data(), w.weight.bytes(), cudaMemcpyDeviceToDevice, ctx_->stream()));
      synchronize();
      w.packed = w.weight;
      return;
    }
    if (w.format != LinearWeight::Format::kFp8 || w.scales.numel() != 1 || w.out_features <= 1) return;
    float value = 0.0f;
    copy(Tensor(&value, DType::kF32, {1}), w.scales.view({1}));
    synchronize();
    std::vector<float> rows(w.out_features, value);
    const Tensor host(rows.data(), DType::kF32, {w.out_features, 1});
    if (w.scales.device().kind == DeviceKind::kCuda) {
      w.scales = upload_weight(host, keep_alive);
      synchronize();  // `rows` goes out of scope
    } else {
      keep_alive.push_back(Buffer::host(host.bytes()));
      std::memcpy(keep_alive.back().data(), rows.data(), host.bytes());
      w.scales = Tensor(keep_alive.back().data(), DType::kF32, {w.out_features, 1});
    }
    w.scale_block_rows = 1;
    w.scale_block_cols = w.in_features;
  }

  // The expert kernels read bf16, f32 and MXFP4: FP8 and integer experts become bf16 (f32 in exact mode, the exact
  // values) on the host before they are uploaded, at that format's memory and speed. Grouped FP8 and integer GEMMs
  // are not built yet.
  void prepare_experts(MoeWeights& experts, std::vector<Buffer>& keep_alive) override {
    for (auto* list : {&experts.gate, &experts.up, &experts.gate_up, &experts.down})
      for (LinearWeight& w : *list) {
        if (w.format != LinearWeight::Format::kFp8 && w.format != LinearWeight::Format::kAffine) continue;
        if (!logged_fp8_experts_) {
          RS_LOG_INFO("{} MoE experts run as {} on CUDA (dequantized at load)",
                      w.format == LinearWeight::Format::kFp8 ? "FP8" : "Integer", ctx_->exact_f32() ? "f32" : "bf16");
          logged_fp8_experts_ = true;
        }
        if (!host_pool_) host_pool_ = std::make_unique<ThreadPool>(hardware_threads());
        w = dequantize_on_host(*host_pool_, w, ctx_->exact_f32() ? DType::kF32 : DType::kBF16, keep_alive);
      }
  }

  void embedding(const Tensor& table, const Tensor& ids, Tensor out) override {
    const int64_t hidden = table.dim(1);
    RS_CHECK(out.numel() == ids.numel() * hidden && ids.dtype() == DType::kI32, "embedding: ids {} table {} out {}",
             ids.shape_string(), table.shape_string(), out.shape_string());
    on_device({&table, &ids, &out});
    launch_embedding(table.data(), elem_type(table.dtype()), table.dim(0), hidden, ids.data_as<int32_t>(), ids.numel(),
                     out.data_as<float>(), ctx_->error_flags(), ctx_->stream());
  }

  void embedding_affine(const LinearWeight& table, const Tensor& ids, Tensor out) override {
    RS_CHECK(table.format == LinearWeight::Format::kAffine && table.packed.empty() && table.input_order.empty() &&
                 out.numel() == ids.numel() * table.in_features && ids.dtype() == DType::kI32,
             "embedding_affine: ids {} of a [{}, {}] table into {}", ids.shape_string(), table.out_features,
             table.in_features, out.shape_string());
    on_device({&table.weight, &table.scales, &ids, &out});
    launch_embedding_affine(table.weight.data_as<uint8_t>(), table.scales.data_as<float>(), table.bits,
                            table.scale_block_cols, table.out_features, table.in_features, ids.data_as<int32_t>(),
                            ids.numel(), out.data_as<float>(), ctx_->error_flags(), ctx_->stream());
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, bool add_one, Tensor out) override {
    const int64_t width = x.dim(-1);
    RS_CHECK(weight.numel() == width && out.numel() == x.numel(), "rms_norm: x {} weight {} out {}", x.shape_string(),
             weight.shape_string(), out.shape_string());
    on_device({&x, &weight, &out});
    launch_rms_norm(x.data_as<float>(), weight.data(), elem_type(weight.dtype()), x.rows(), width, eps, add_one,
                    out.data(), activation_out_bf16(x, out), ctx_->stream());
  }

  void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out) override {
    run_linear(*ctx_, x, w, bias, out);
  }

  void linear_silu_mul(const Tensor& x, const LinearWeight& gate_up, Tensor gate_up_out, Tensor out) override {
    if (!run_linear_silu_mul(*ctx_, x, gate_up, out)) Backend::linear_silu_mul(x, gate_up, gate_up_out, out);
  }

  void rope(Tensor x, const Tensor& positions, const Tensor& cos_sin, int32_t rotary_dim) override {
    RS_CHECK(x.ndim() == 3 && rotary_dim <= x.dim(2) && rotary_dim % 2 == 0 && cos_sin.dim(1) == rotary_dim &&
                 positions.numel() == x.dim(0),
             "rope: x {} positions {} table {} rotary dim {}", x.shape_string(), positions.shape_string(),
             cos_sin.shape_string(), rotary_dim);
    on_device({&x, &positions, &cos_sin});
    launch_rope(x.data_as<float>(), x.dim(0), x.dim(1), x.dim(2), positions.data_as<int32_t>(),
                cos_sin.data_as<float>(), cos_sin.dim(0), rotary_dim, ctx_->error_flags(), ctx_->stream());
  }

  void store_kv(const Tensor& k, const Tensor& v, const KvCache& cache, const BatchView& batch) override {
    const int64_t row_width = cache.k.dim(1) * cache.k.dim(2);
    RS_CHECK(k.numel() == k.dim(0) * row_width && v.numel() == k.numel(),
             "store_kv: k {} does not match cache rows of {}", k.shape_string(), row_width);
    const KvType type = check_cache(cache);
    on_device({&k, &v, &cache.k, &cache.v, &batch.kv_slots});
    launch_store_kv(k.data_as<float>(), v.data_as<float>(), k.dim(0), row_width, batch.kv_slots.data_as<int32_t>(),
                    cache.k.dim(0), cache.k.data(), cache.v.data(), type, cache.k_scale, cache.v_scale,
                    ctx_->error_flags(), ctx_->stream());
  }

  void attention(const Tensor& q, const KvCache& cache, const BatchView& batch, const AttentionParams& params,
                 Tensor out) override {
    RS_CHECK(q.numel() == q.dim(0) * params.num_heads * params.head_dim, "attention: q {} for {} heads of {}",
             q.shape_string(), params.num_heads, params.head_dim);
    on_device({&q});
    AttentionArgs a = attention_args(static_cast<int32_t>(q.dim(0)), cache, batch, params, out);
    a.q = q.data_as<float>();
    if (use_flash_attention(batch, params, a.cache_type)) return launch_flash(a, batch, params);
    const int64_t partial = a.batch_invariant
                                ? 0
                                : attention_partial_floats(a.num_tokens, params.num_heads, params.head_dim,
                                                           batch.max_kv_len, params.window, ctx_->num_sms(), &a.splits);
    if (partial > 0) a.partial = static_cast<float*>(ctx_->scratch(ScratchSlot::kAttention, partial * sizeof(float)));
    launch_attention(a, ctx_->stream());
  }

  // A decode step (one token per sequence) on the flash kernel prepares q, k and v inside the attention kernel.
  void qkv_attention(const Tensor& qkv, const QkvNormRope& prepare, const KvCache& cache, const BatchView& batch,
                     const AttentionParams& params, Tensor q_scratch, Tensor out) override {
    const int32_t tokens = static_cast<int32_t>(q_scratch.dim(0));
    const bool fuse = tokens > 0 && tokens == batch.num_seqs && !ctx_->batch_invariant() &&
                      params.num_heads / std::max(params.num_kv_heads, 1) <= 16 &&
                      use_flash_attention(batch, params, check_cache(cache));
    if (!fuse) return Backend::qkv_attention(qkv, prepare, cache, batch, params, q_scratch, out);
    AttentionArgs a = attention_args(tokens, cache, batch, params, out);
    a.prepare = prepare_args(qkv, prepare.q_norm, prepare.k_norm, prepare.eps, prepare.cos_sin, prepare.rotary_dim,
                             cache, batch, q_scratch);
    a.prepare.q_out = nullptr;  // q stays in the attention kernel's shared memory
    launch_flash(a, batch, params);
  }

  void add_rms_norm(Tensor x, const Tensor& delta, const Tensor& weight, float eps, bool add_one, Tensor out) override {
    const int64_t width = x.dim(-1);
    RS_CHECK(delta.numel() == x.numel() && out.numel() == x.numel() && weight.numel() == width,
             "add_rms_norm: x {} delta {} weight {} out {}", x.shape_string(), delta.shape_string(),
             weight.shape_string(), out.shape_string());
    on_device({&x, &delta, &weight, &out});
    launch_add_rms_norm(x.data_as<float>(), delta.data_as<float>(), weight.data(), elem_type(weight.dtype()), x.rows(),
                        width, eps, add_one, out.data(), activation_out_bf16(x, out), ctx_->stream());
  }

  void qkv_prepare(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos_sin,
                   int32_t rotary_dim, const KvCache& cache, const BatchView& batch, Tensor q_out) override {
    launch_qkv_prepare(prepare_args(qkv, q_norm, k_norm, eps, cos_sin, rotary_dim, cache, batch, q_out),
                       ctx_->stream());
  }

  void add(const Tensor& a, const Tensor& b, Tensor out) override {
    RS_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "add: shapes {} {} {}", a.shape_string(),
             b.shape_string(), out.shape_string());
    on_device({&a, &b, &out});
    launch_add(a.data_as<float>(), b.data_as<float>(), out.data_as<float>(), a.numel(), ctx_->stream());
  }

  void silu_mul(const Tensor& gate_up, Tensor out) override {
    const int64_t inter = out.dim(-1);
    RS_CHECK(gate_up.dim(-1) == 2 * inter && gate_up.rows() == out.rows(), "silu_mul: {} -> {}", gate_up.shape_string(),
             out.shape_string());
    on_device({&gate_up, &out});
    launch_silu_mul(gate_up.data_as<float>(), out.rows(), inter, out.data(), activation_out_bf16(gate_up, out),
                    ctx_->stream());
  }

  void gather_rows(const Tensor& x, const Tensor& rows, Tensor out) override {
    const int64_t width = x.dim(-1);
    RS_CHECK(out.numel() == rows.numel() * width, "gather_rows: x {} rows {} out {}", x.shape_string(),
             rows.shape_string(), out.shape_string());
    on_device({&x, &rows, &out});
    launch_gather_rows(x.data_as<float>(), rows.data_as<int32_t>(), rows.numel(), width, out.data_as<float>(),
                       ctx_->stream());
  }

  void scatter_rows(const Tensor& x, const Tensor& rows, Tensor out, int64_t column) override {
    const int64_t width = x.dim(-1);
    RS_CHECK(x.dtype() == DType::kF32 && out.dtype() == DType::kF32 && x.dim(0) == rows.numel() && column >= 0 &&
                 column + width <= out.dim(-1),
             "scatter_rows: x {} rows {} out {} column {}", x.shape_string(), rows.shape_string(), out.shape_string(),
             column);
    on_device({&x, &rows, &out});
    launch_scatter_rows(x.data_as<float>(), rows.data_as<int32_t>(), rows.numel(), width, out.data_as<float>() + column,
                        out.dim(-1), out.rows(), ctx_->error_flags(), ctx_->stream());
  }

  void moe_route(const Tensor& logits, MoeRouting routing, bool renormalize, Tensor ids, Tensor weights) override {
    RS_CHECK(logits.ndim() == 2 && ids.dim(0) == logits.dim(0) && weights.numel() == ids.numel(),
             "moe_route: logits {} ids {} weights {}", logits.shape_string(), ids.shape_string(),
             weights.shape_string());
    on_device({&logits, &ids, &weights});
    launch_moe_route(logits.data_as<float>(), logits.dim(0), static_cast<int32_t>(logits.dim(1)),
                     static_cast<int32_t>(ids.dim(1)), routing == MoeRouting::kSoftmaxTopK, renormalize,
                     ids.data_as<int32_t>(), weights.data_as<float>(), ctx_->stream());
  }

  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeWeights& experts,
                   Tensor out) override {
    run_moe_experts(*ctx_, x, ids, weights, experts, out);
  }

  void moe(const Tensor& x, const Tensor& logits, MoeRouting routing, bool renormalize, const MoeWeights& experts,
           Tensor ids, Tensor weights, Tensor out) override {
    RS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && ids.dim(0) == logits.dim(0) &&
                 weights.numel() == ids.numel(),
             "moe: logits {} ids {} weights {}", logits.shape_string(), ids.shape_string(), weights.shape_string());
    on_device({&logits});
    const MoeRouter router{logits.data_as<float>(), static_cast<int32_t>(logits.dim(1)),
                           routing == MoeRouting::kSoftmaxTopK, renormalize};
    run_moe_experts(*ctx_, x, ids, weights, experts, out, &router);
  }

  // ---- gated delta net, parity-tested against the CPU kernels (cuda_backend_gdn_test) and by the hybrid goldens. ----
  bool supports_recurrent_state() const override { return true; }
  void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor conv_state, const StateBatchView& batch,
                     Tensor out) override {
    const int64_t channels = x.dim(-1), kernel = weight.dim(-1);
    RS_CHECK(x.dtype() == DType::kF32 && weight.dtype() == DType::kF32 && weight.numel() == channels * kernel &&
                 conv_state.ndim() == 3 && conv_state.dim(1) == channels && conv_state.dim(2) == kernel - 1 &&
                 out.numel() == x.numel(),
             "causal_conv1d: x {}, weight {}, state {}", x.shape_string(), weight.shape_string(),
             conv_state.shape_string());
    on_device({&x, &weight, &conv_state, &out});
    launch_causal_conv1d(x.data_as<float>(), weight.data_as<float>(), conv_state.data_as<float>(), gdn_batch(batch),
                         channels, static_cast<int32_t>(kernel), out.data_as<float>(), ctx_->stream());
  }

  void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log, const Tensor& dt_bias, Tensor state,
                        const StateBatchView& batch, const GatedDeltaNetParams& params, Tensor out) override {
    const int64_t nv = params.num_v_heads, dk = params.k_head_dim, dv = params.v_head_dim;
    RS_CHECK(params.num_k_heads > 0 && nv % params.num_k_heads == 0 &&
                 qkv.dim(-1) == 2 * params.num_k_heads * dk + nv * dv && ba.dim(-1) == 2 * nv &&
                 out.dim(-1) == nv * dv && state.ndim() == 4 && state.dim(1) == nv && state.dim(2) == dk &&
                 state.dim(3) == dv && a_log.dtype() == DType::kF32 && dt_bias.dtype() == DType::kF32,
             "gated_delta_rule: qkv {}, ba {}, state {}, out {}", qkv.shape_string(), ba.shape_string(),
             state.shape_string(), out.shape_string());
    on_device({&qkv, &ba, &a_log, &dt_bias, &state, &out});
    launch_gated_delta_rule(qkv.data_as<float>(), ba.data_as<float>(), a_log.data_as<float>(), dt_bias.data_as<float>(),
                            state.data_as<float>(), gdn_batch(batch),
                            GdnShape{params.num_k_heads, params.num_v_heads, params.k_head_dim, params.v_head_dim},
                            out.data_as<float>(), ctx_->stream(), ctx_->batch_invariant());
  }

  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) override {
    const int64_t width = x.dim(-1);
    RS_CHECK(weight.numel() == width && z.numel() == x.numel() && out.numel() == x.numel(),
             "gated_rms_norm: x {}, z {}, weight {}", x.shape_string(), z.shape_string(), weight.shape_string());
    on_device({&x, &z, &weight, &out});
    launch_gated_rms_norm(x.data_as<float>(), z.data_as<float>(), weight.data(), elem_type(weight.dtype()), x.rows(),
                          width, eps, out.data_as<float>(), ctx_->stream());
  }

  void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor out) override {
    const int64_t width = x.dim(-1), gate_width = gate.dim(-1);
    RS_CHECK(gate.rows() == x.rows() && (gate_width == width || gate_width == 1) && out.numel() == x.numel(),
             "sigmoid_mul: x {}, gate {}", x.shape_string(), gate.shape_string());
    on_device({&x, &gate, &out});
    launch_sigmoid_mul(x.data_as<float>(), gate.data_as<float>(), x.rows(), width, gate_width, out.data_as<float>(),
                       ctx_->stream());
  }

  void apply_token_bitmask(Tensor logits, const Tensor& bitmask) override {
    RS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && bitmask.ndim() == 2 &&
                 bitmask.dim(0) == logits.dim(0) && bitmask.dim(1) == (logits.dim(1) + 31) / 32 &&
                 dtype_size(bitmask.dtype()) == 4,
             "apply_token_bitmask: logits {} bitmask {}", logits.shape_string(), bitmask.shape_string());
    on_device({&logits, &bitmask});
    launch_token_bitmask(logits.data_as<float>(), static_cast<const uint32_t*>(bitmask.data()),
                         static_cast<int32_t>(logits.dim(0)), static_cast<int32_t>(logits.dim(1)), ctx_->stream());
  }

  void sample(Tensor logits, std::span<const SampleSpec> specs, std::span<SampledToken> out) override {
    const auto rows = static_cast<int32_t>(specs.size());
    RS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && logits.dim(0) == rows && out.size() == specs.size(),
             "sample: logits {} for {} rows", logits.shape_string(), specs.size());
    on_device({&logits});
    if (rows == 0) return;
    const auto vocab = static_cast<int32_t>(logits.dim(1));
    // One pinned upload (specs | penalties) and one pinned download (results) per call.
    size_t num_penalties = 0;
    for (const SampleSpec& spec : specs) num_penalties += spec.has_penalties() ? spec.penalty_tokens.size() : 0;
    const size_t spec_bytes = rows * sizeof(SampleRowSpec), penalty_bytes = num_penalties * sizeof(int2);
    const size_t upload_bytes = spec_bytes + penalty_bytes, result_bytes = rows * sizeof(SampleRowResult);
    char* host = static_cast<char*>(sample_host_.reserve(upload_bytes + result_bytes));
    auto* host_specs = reinterpret_cast<SampleRowSpec*>(host);
    auto* host_penalties = reinterpret_cast<int2*>(host + spec_bytes);
    auto* host_results = reinterpret_cast<SampleRowResult*>(host + upload_bytes);
    int32_t next_penalty = 0;
    for (int32_t r = 0; r < rows; ++r) {
      const SampleSpec& s = specs[r];
      SampleRowSpec& d = host_specs[r];
      d = SampleRowSpec{s.temperature,
                        s.top_p,
                        s.min_p,
                        s.repetition_penalty,
                        s.presence_penalty,
                        s.frequency_penalty,
                        s.top_k,
                        std::min(s.top_logprobs, kMaxTopLogprobs),
                        s.logprobs ? 1 : 0,
                        s.greedy() ? 1 : 0,
                        next_penalty,
                        0,
                        s.seed,
                        s.step};
      if (!s.has_penalties()) continue;
      for (const PenaltyToken& t : s.penalty_tokens) host_penalties[next_penalty++] = int2{t.id, t.output_count};
      d.penalty_count = next_penalty - d.penalty_begin;
    }
    const size_t scratch_bytes = sample_scratch_bytes(rows, vocab);
    char* device =
        static_cast<char*>(ctx_->scratch(ScratchSlot::kSample, upload_bytes + result_bytes + scratch_bytes + 16));
    auto* device_results = reinterpret_cast<SampleRowResult*>(device + upload_bytes);
    void* scratch = scratch_bytes ? device + ((upload_bytes + result_bytes + 15) & ~size_t{15}) : nullptr;
    RS_CUDA_CHECK(cudaMemcpyAsync(device, host, upload_bytes, cudaMemcpyHostToDevice, ctx_->stream()));
    launch_sample(logits.data_as<float>(), rows, vocab, reinterpret_cast<const SampleRowSpec*>(device),
                  reinterpret_cast<const int2*>(device + spec_bytes), device_results, scratch, ctx_->stream());
    RS_CUDA_CHECK(cudaMemcpyAsync(host_results, device_results, result_bytes, cudaMemcpyDeviceToHost, ctx_->stream()));
    ctx_->synchronize_and_check();
    for (int32_t r = 0; r < rows; ++r) {
      const SampleRowResult& res = host_results[r];
      SampledToken& token = out[r];
      token.token_id = res.token_id;
      token.logprob = specs[r].logprobs ? res.logprob : 0.0f;
      token.top_logprobs.clear();
      for (int32_t i = 0; i < res.num_top; ++i) token.top_logprobs.push_back({res.top_ids[i], res.top_logprobs[i]});
    }
  }

 private:
  // Tensor cores (flash_attention.cu) on a bf16 or fp8 cache unless "cuda-core" was asked for. Exact mode keeps the
  // CUDA-core kernel, whose products follow the CPU reference's order more closely.
  bool use_flash_attention(const BatchView& batch, const AttentionParams& params, KvType cache_type) const {
    if (!flash_ || ctx_->exact_f32() || batch.seq_token_start.empty() || batch.num_seqs <= 0 || !(params.scale > 0))
      return false;
    if (!flash_attention_supported(params.num_heads, params.num_kv_heads, params.head_dim, cache_type)) return false;
    RS_CHECK(batch.seq_token_start.numel() == int64_t{batch.num_seqs} + 1,
             "attention: seq_token_start {} for {} sequences", batch.seq_token_start.shape_string(), batch.num_seqs);
    return true;
  }

  // The arguments every attention launch shares (q and the split choice come from the caller).
  AttentionArgs attention_args(int32_t tokens, const KvCache& cache, const BatchView& batch,
                               const AttentionParams& params, Tensor out) const {
    const Tensor &k_cache = cache.k, &v_cache = cache.v;
    RS_CHECK(params.causal, "attention without causality (a DFlash drafter's block) is not on CUDA yet");
    RS_CHECK(params.num_kv_heads > 0 && params.num_heads % params.num_kv_heads == 0 && params.head_dim <= 256 &&
                 out.numel() == int64_t{tokens} * params.num_heads * params.head_dim,
             "attention: out {} for {} tokens with {} heads / {} kv heads of {}", out.shape_string(), tokens,
             params.num_heads, params.num_kv_heads, params.head_dim);
    const KvType type = check_cache(cache);
    RS_CHECK(k_cache.dim(-1) == params.head_dim, "attention: cache {} has rows of {} values", k_cache.shape_string(),
             params.head_dim);
    on_device({&k_cache, &v_cache, &out, &batch.positions, &batch.token_seq, &batch.page_table, &params.sinks});
    AttentionArgs a{};
    a.k_cache = k_cache.data();
    a.v_cache = v_cache.data();
    a.cache_type = type;
    a.k_scale = type == KvType::kFp8 ? cache.k_scale : 1.0f;  // kernels multiply by them unconditionally
    a.v_scale = type == KvType::kFp8 ? cache.v_scale : 1.0f;
    a.positions = batch.positions.data_as<int32_t>();
    a.token_seq = batch.token_seq.data_as<int32_t>();
    a.page_table = batch.page_table.data_as<int32_t>();
    a.sinks = params.sinks.empty() ? nullptr : params.sinks.data();
    a.sinks_type = params.sinks.empty() ? ElemType::kF32 : elem_type(params.sinks.dtype());
    a.out = out.data_as<float>();
    a.error_flags = ctx_->error_flags();
    a.num_tokens = tokens;
    a.num_heads = params.num_heads;
    a.num_kv_heads = params.num_kv_heads;
    a.head_dim = params.head_dim;
    a.page_size = batch.page_size;
    a.page_shift = std::has_single_bit(static_cast<uint32_t>(batch.page_size))
                       ? std::countr_zero(static_cast<uint32_t>(batch.page_size))
                       : -1;
    a.max_pages = static_cast<int32_t>(batch.page_table.dim(1));
    a.window = params.window;
    a.scale = params.scale;
    a.num_seqs = batch.num_seqs;
    a.batch_invariant = ctx_->batch_invariant();
    a.splits = 1;
    return a;
  }

  // The tensor-core kernel: key splits (and their partial buffer) unless batch-invariant.
  void launch_flash(AttentionArgs& a, const BatchView& batch, const AttentionParams& params) {
    on_device({&batch.seq_token_start});
    a.seq_token_start = batch.seq_token_start.data_as<int32_t>();
    const int64_t partial = a.batch_invariant
                                ? 0
                                : flash_attention_partial_floats(a.num_tokens, batch.num_seqs, params.num_heads,
                                                                 params.num_kv_heads, params.head_dim, batch.max_kv_len,
                                                                 params.window, ctx_->num_sms(), &a.splits);
    if (partial > 0) a.partial = static_cast<float*>(ctx_->scratch(ScratchSlot::kAttention, partial * sizeof(float)));
    a.split_counters = ctx_->split_counters();
    a.split_counter_words = DeviceContext::kSplitCounters;
    launch_flash_attention(a, ctx_->stream());
  }

  QkvPrepareArgs prepare_args(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& cos_sin, int32_t rotary_dim, const KvCache& cache, const BatchView& batch,
                              Tensor q_out) const {
    const Tensor &k_cache = cache.k, &v_cache = cache.v;
    const int64_t tokens = q_out.dim(0), heads = q_out.dim(1), hd = q_out.dim(2), kv_heads = k_cache.dim(1);
    RS_CHECK(qkv.numel() == tokens * (heads + 2 * kv_heads) * hd && k_cache.dim(2) == hd &&
                 cos_sin.dim(1) == rotary_dim && rotary_dim <= hd && rotary_dim % 2 == 0 &&
                 batch.kv_slots.numel() == tokens && batch.positions.numel() == tokens,
             "qkv_prepare: qkv {} for q {}, cache {}, rotary dim {}", qkv.shape_string(), q_out.shape_string(),
             k_cache.shape_string(), rotary_dim);
    RS_CHECK(q_norm.empty() == k_norm.empty() && (q_norm.empty() || q_norm.dtype() == k_norm.dtype()),
             "qkv_prepare: q and k norms must both be given, in one dtype");
    const KvType type = check_cache(cache);
    on_device({&qkv, &q_norm, &k_norm, &cos_sin, &k_cache, &v_cache, &q_out, &batch.kv_slots, &batch.positions});
    QkvPrepareArgs a{};
    a.qkv = qkv.data_as<float>();
    a.q_norm = q_norm.empty() ? nullptr : q_norm.data();
    a.k_norm = k_norm.empty() ? nullptr : k_norm.data();
    a.norm_type = q_norm.empty() ? ElemType::kF32 : elem_type(q_norm.dtype());
    a.eps = eps;
    a.positions = batch.positions.data_as<int32_t>();
    a.cos_sin = cos_sin.data_as<float>();
    a.max_positions = cos_sin.dim(0);
    a.rotary_dim = rotary_dim;
    a.slots = batch.kv_slots.data_as<int32_t>();
    a.cache_rows = k_cache.dim(0);
    a.k_cache = k_cache.data();
    a.v_cache = v_cache.data();
    a.cache_type = type;
    a.k_scale = cache.k_scale;
    a.v_scale = cache.v_scale;
    a.q_out = q_out.data_as<float>();
    a.error_flags = ctx_->error_flags();
    a.num_tokens = tokens;
    a.num_heads = static_cast<int32_t>(heads);
    a.num_kv_heads = static_cast<int32_t>(kv_heads);
    a.head_dim = static_cast<int32_t>(hd);
    return a;
  }

  static KvType check_cache(const KvCache& cache) {
    check_kv_cache(cache, "CUDA");
    const DType dtype = cache.k.dtype();
    return dtype == DType::kF32 ? KvType::kF32 : dtype == DType::kBF16 ? KvType::kBF16 : KvType::kFp8;
  }

  // The device-side view of a step's sequences for the gated-delta-net kernels.
  GdnBatch gdn_batch(const StateBatchView& batch) const {
    on_device({&batch.positions, &batch.seq_token_start, &batch.state_slots, &batch.checkpoint_slots});
    return GdnBatch{batch.positions.data_as<int32_t>(),
                    batch.seq_token_start.data_as<int32_t>(),
                    batch.state_slots.data_as<int32_t>(),
                    batch.checkpoint_slots.empty() ? nullptr : batch.checkpoint_slots.data_as<int32_t>(),
                    batch.num_seqs,
                    static_cast<int32_t>(batch.positions.numel())};
  }

  // Whether a GEMM-input producer writes bf16 (see linear_input_dtype); its input `x` is always f32.
  static bool activation_out_bf16(const Tensor& x, const Tensor& out) {
    RS_CHECK(x.dtype() == DType::kF32 && (out.dtype() == DType::kF32 || out.dtype() == DType::kBF16),
             "activations: f32 in, f32 or bf16 out (got {} -> {})", dtype_name(x.dtype()), dtype_name(out.dtype()));
    return out.dtype() == DType::kBF16;
  }

  // Every non-empty tensor must live on this device; also makes the device current for the launches that follow.
  void on_device(std::initializer_list<const Tensor*> tensors) const {
    for (const Tensor* t : tensors)
      RS_CHECK(t->empty() || t->device() == device(), "tensor {} is on {}, expected {}", t->shape_string(),
               device_name(t->device()), device_name(device()));
    ctx_->activate();
  }

  std::shared_ptr<DeviceContext> ctx_;
  bool flash_ = true;
  bool logged_fp8_experts_ = false;
  std::unique_ptr<ThreadPool> host_pool_;  // dequantizes FP8 experts at load
  PinnedBuffer sample_host_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int index, const BackendOptions& options) {
  return std::make_unique<CudaBackend>(index, options);
}

int cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

}  // namespace rs::cuda
