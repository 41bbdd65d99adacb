// Backend: the device seam. Owns memory and runs the op set every model is built from (CPU reference; CUDA; later
// Metal).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "backend/sampling.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace rs {

// A linear layer's weight [out_features, in_features] in one of the storage formats we load. A format is a kind of
// this handle (made by model/linear_loader from what the checkpoint holds), never a field of a model: a new format
// arrives here, in the loader and in the backends.
struct LinearWeight {
  enum class Format : uint8_t {
    kDense,   // f32/bf16/f16 values
    kMxfp4,   // FP4 E2M1 in blocks of 32 along `in`, one E8M0 scale per block (gpt-oss experts)
    kFp8,     // FP8 E4M3 values times an f32 scale per [scale_block_rows, scale_block_cols] block (below)
    kAffine,  // unsigned `bits`-bit integers q, w = scale * q + bias per group of scale_block_cols inputs (below)
  };
  Format format = Format::kDense;
  // kDense: [out, in] f32/bf16/f16. kMxfp4: u8 blocks [out, in/32, 16]. kFp8: F8_E4M3 [out, in]. kAffine: u8
  // [out, in * bits / 8], element i of a row at bit i * bits (little-endian: MLX's u32 words read as bytes).
  Tensor weight;
  // kMxfp4: u8 E8M0 [out, in/32]. kFp8: f32 [ceil(out / block rows), ceil(in / block cols)]. kAffine: f32
  // [out, in / group, 2] (scale, bias) pairs.
  Tensor scales;
  int64_t out_features = 0;
  int64_t in_features = 0;
  Tensor packed;  // optional backend-specific copy made by Backend::prepare_linear (CPU: bf16 VNNI panels), or empty
  // Optional second backend-specific form for row-wise kernels (CPU: an integer weight's narrowed row ranges,
  // kernels/affine_parts), or empty.
  Tensor packed_rows;
  // kFp8: element (o, i) is fp8(weight[o, i]) * scales[o / scale_block_rows, i / scale_block_cols]. One block of
  // [out, in] is a per-tensor scale, [1, in] per output channel, [128, 128] the block scaling of Qwen's and
  // DeepSeek's FP8 checkpoints.
  // kAffine: scale_block_rows is 1 and scale_block_cols the group size. MLX stores (scale, bias); AWQ and GPTQ store
  // (scale, zero) and load as bias = -scale * zero, exact in f32 (a 16-bit scale times a small integer).
  int64_t scale_block_rows = 0;
  int64_t scale_block_cols = 0;
  int32_t bits = 0;  // kAffine: 2, 4 or 8
  // Empty, or i32 [in]: column i of the weight multiplies input input_order[i] (GPTQ act-order checkpoints, whose
  // groups are contiguous only in that order). Backends gather the activations in this order before the product.
  Tensor input_order;
};

// Per-layer attention facts (never one global setting: gpt-oss alternates windows per layer).
struct AttentionParams {
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;  // multiplies q.k
  int32_t window = 0;  // 0 = full causal; W = keys (i-W, i] (W keys including self)
  Tensor sinks;        // [num_heads] per-head sink logits, or empty
  // false: every query of a sequence sees all its keys up to seq_kv_len - 1, the step's later tokens included (a
  // block-diffusion drafter's block attends bidirectionally, issue 43); a window still counts back from the query's
  // own position. CPU only for now (CUDA refuses it).
  bool causal = true;
};

// How qkv_prepare turns a fused q|k|v projection into attention inputs: per-head RMSNorm weights of q and k (both or
// neither) and the rotary table (see rope()).
struct QkvNormRope {
  Tensor q_norm, k_norm;
  float eps = 1e-6f;
  Tensor cos_sin;
  int32_t rotary_dim = 0;
};

// One layer's paged K/V: k and v [cache rows, kv_heads, head_dim] in the pool's element type (f32, bf16 or FP8 e4m3).
// An FP8 cache holds x / scale rounded to nearest and saturated to +-448, and reads back e4m3 x scale: one scale per
// tensor per layer (the checkpoint's k_scale / v_scale, else 1). Other types ignore the scales.
struct KvCache {
  Tensor k, v;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};
// The checks every backend makes of a KvCache: K and V of one of the three element types, fp8 scales positive.
// `backend` names the backend in the error.
void check_kv_cache(const KvCache& cache, std::string_view backend);

// Batch metadata on the backend's device, uploaded once per step by the engine (see engine/forward_batch.h).
struct BatchView {
  Tensor positions;   // i32 [T]
  Tensor token_seq;   // i32 [T] sequence index of each token
  Tensor seq_kv_len;  // i32 [S]
  Tensor page_table;  // i32 [S, max_pages] for the KV group being read
  Tensor kv_slots;    // i32 [T] cache row (page * page_size + offset) for the group being written
  int32_t page_size = 0;
  int32_t num_seqs = 0;
  int32_t max_kv_len = 0;  // max over seq_kv_len (host-known bound)
  Tensor seq_token_start;  // i32 [S + 1] first token of each sequence (tokens are grouped by sequence), or empty
};

// Batch metadata of the recurrent (gated-delta-net) layers, on the backend's device. Tokens are grouped by sequence.
struct StateBatchView {
  Tensor positions;        // i32 [T]; a sequence whose first token of the step is at position 0 starts from zero state
  Tensor seq_token_start;  // i32 [S + 1] first token of each sequence
  Tensor state_slots;      // i32 [S] the sequence's StatePool slot; -1 = an idle row (its outputs are left as they are)
  int32_t num_seqs = 0;
  // Empty, or i32 [T]: a slot (>= 0) that also receives the state after token t (speculative verification keeps the
  // state after each draft token for rollback). Sequences with any checkpoint run token by token (recurrent form).
  Tensor checkpoint_slots;
};

// Shapes of one gated-delta-net layer (MODELS.md §1.6): value head h reads key head h / (num_v_heads / num_k_heads).
struct GatedDeltaNetParams {
  int32_t num_k_heads = 0;
  int32_t num_v_heads = 0;
  int32_t k_head_dim = 0;
  int32_t v_head_dim = 0;
};

enum class MoeRouting : uint8_t {
  kSoftmaxTopK,  // Qwen3-MoE: softmax over all experts, top-k, optional renormalisation
  kTopKSoftmax,  // gpt-oss: top-k logits, softmax over those k
};

enum class MoeActivation : uint8_t {
  kSwiGlu,         // down(silu(gate(x)) * up(x)), separate gate/up weights
  kClampedSwiGlu,  // gate_up interleaved, with bias (gpt-oss): (clamp(up)+1) * g*sigmoid(alpha*g), g=min(gate,limit)
};

// Expert weights of one MoE layer. kSwiGlu uses gate/up/down; kClampedSwiGlu uses gate_up/down + biases.
struct MoeWeights {
  MoeActivation activation = MoeActivation::kSwiGlu;
  std::vector<LinearWeight> gate, up, gate_up, down;  // one per expert
  Tensor gate_up_bias;                                // [E, 2I] or empty
  Tensor down_bias;                                   // [E, H] or empty
  float swiglu_alpha = 1.702f;
  float swiglu_limit = 7.0f;
  // Expert parallelism: the lists hold experts [first_expert, first_expert + size) of total_experts (0: the lists'
  // size); tokens routed to the others contribute nothing here (another rank adds them).
  int32_t first_expert = 0;
  int32_t total_experts = 0;
};

// A recorded sequence of ops that can be re-run as one unit (a CUDA graph). It reads and writes the very buffers it
// was recorded with: callers change inputs in place between replays.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
  virtual void replay() = 0;
};

struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // Memory. alloc returns zero-filled device memory.
  virtual Buffer alloc(size_t bytes) = 0;
  // Copies between any two tensors of equal byte size where at least one side is on this backend's device or host.
  virtual void copy(Tensor dst, const Tensor& src) = 0;
  virtual void synchronize() = 0;
  // Host memory that copies to and from this device read fastest (pinned on CUDA). A copy from it may still be in
  // flight when copy() returns: do not overwrite it before the next synchronize().
  virtual Buffer alloc_host(size_t bytes) { return Buffer::host(bytes); }
  // Free and total memory of this backend's device (host RAM for the CPU backend).
  virtual MemoryInfo memory_info() const = 0;
  // Records the ops `enqueue` issues into a graph instead of running them (only where supports_graphs()). Ops must not
  // allocate while recording: run the same work once before capturing it.
  virtual bool supports_graphs() const { return false; }
  virtual std::unique_ptr<BackendGraph> capture(const std::function<void()>& enqueue) { return nullptr; }
  // Changes whenever memory that ops use internally (scratch) moves: graphs recorded before then must be recaptured.
  virtual uint64_t memory_epoch() const { return 0; }
  // Device-resident copy of a host weight (CPU: returns a view of the same memory, no copy).
  virtual Tensor upload_weight(const Tensor& host, std::vector<Buffer>& keep_alive) = 0;
  // Called once per linear weight after loading: may set w.packed to a layout this backend's linear() prefers
  // (memory appended to keep_alive). `weight` stays valid. Default: nothing.
  virtual void prepare_linear(LinearWeight& w, std::vector<Buffer>& keep_alive) {}
  // Called once per MoE layer while its expert weights are still on the host (before they are uploaded): may replace
  // experts stored in a format this backend's expert kernels do not read with a form they do (host memory appended
  // to keep_alive). Default: nothing.
  virtual void prepare_experts(MoeWeights& experts, std::vector<Buffer>& keep_alive) {}

  // ---- ops. Activations are f32 [rows, features] unless stated. ----
  // The dtype in which a model may hand this backend the inputs of a step's linears with bf16 weights, for `rows`
  // rows: bf16 where the backend's GEMM rounds its input to bf16 anyway (CUDA's fast path past the GEMV's rows), so
  // that storing it rounded saves a conversion pass and half the bytes at the same numerics; f32 otherwise. Where it
  // says bf16, rms_norm, add_rms_norm and silu_mul accept a bf16 `out` and linear a bf16 `x`.
  virtual DType linear_input_dtype(int64_t rows) const { return DType::kF32; }
  // out[t] = table[ids[t]] (table f32/bf16 [V, H])
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor out) = 0;
  // Tensor parallelism's vocabulary shard: `table` holds rows [first_id, first_id + rows) of a `vocab`-row table; ids
  // outside it give zero rows (the ranks' lookups are then summed). The default takes only a whole table.
  virtual void embedding_shard(const Tensor& table, const Tensor& ids, int64_t first_id, int64_t vocab, Tensor out);
  // The same from an integer (LinearWeight::kAffine) table [vocab, hidden]: rows exactly dequantized to f32 as they
  // are read (MLX checkpoints quantize the embedding); CPU and CUDA have one. A backend without it turns the table
  // into one its embedding() reads in prepare_embedding, and never gets this call.
  virtual void embedding_affine(const LinearWeight& table, const Tensor& ids, Tensor out);
  // embedding_affine over a vocabulary shard (rows [first_id, first_id + out_features) of `vocab`), as
  // embedding_shard. The default takes only a whole table.
  virtual void embedding_affine_shard(const LinearWeight& table, const Tensor& ids, int64_t first_id, int64_t vocab,
                                      Tensor out);
  // Called once for an integer embedding table, on the host before upload: may replace it by a dense host table
  // (memory in keep_alive) that embedding() reads.
  virtual void prepare_embedding(LinearWeight& table, std::vector<Buffer>& keep_alive) {}
  // y = x * rsqrt(mean(x^2) + eps) * (add_one ? 1 + w : w), row-wise over the last dim
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, bool add_one, Tensor out) = 0;
  // out = x . W^T (+ bias); x [T, in], out [T, out]
  virtual void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out) = 0;
  // In-place rotary embedding, NeoX half-split over the first rotary_dim dims of each head.
  // x [T, heads, head_dim]; cos_sin f32 [max_pos, rotary_dim] = (cos[0..d/2) | sin[0..d/2)), scaling folded in.
  virtual void rope(Tensor x, const Tensor& positions, const Tensor& cos_sin, int32_t rotary_dim) = 0;
  // Writes k, v [T, kv_heads, head_dim] into the cache rows batch.kv_slots (negative slot = skip).
  virtual void store_kv(const Tensor& k, const Tensor& v, const KvCache& cache, const BatchView& batch) = 0;
  // Causal paged attention with optional window and sinks. q [T, heads, hd] -> out [T, heads*hd].
  virtual void attention(const Tensor& q, const KvCache& cache, const BatchView& batch, const AttentionParams& params,
                         Tensor out) = 0;
  // x += delta, then out = rms_norm(x) (the residual add and the next norm in one pass); x [rows, width].
  virtual void add_rms_norm(Tensor x, const Tensor& delta, const Tensor& weight, float eps, bool add_one,
                            Tensor out) = 0;
  // The attention inputs from one fused projection qkv [T, (heads + 2 * kv_heads) * head_dim] (q | k | v per token):
  // q and k are RMS-normed per head (when q_norm/k_norm are given) and rotated like rope(); q goes to q_out
  // [T, heads, head_dim], k and v to the cache rows batch.kv_slots (as store_kv).
  virtual void qkv_prepare(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                           const Tensor& cos_sin, int32_t rotary_dim, const KvCache& cache, const BatchView& batch,
                           Tensor q_out) = 0;
  // qkv_prepare() into q_scratch [T, heads, head_dim], then attention() on it: one op so that a backend can fuse the
  // two (CUDA: a decode step's attention kernel prepares its own q and stores k and v, one launch fewer per layer;
  // q_scratch is then left unwritten).
  virtual void qkv_attention(const Tensor& qkv, const QkvNormRope& prepare, const KvCache& cache,
                             const BatchView& batch, const AttentionParams& params, Tensor q_scratch, Tensor out) {
    qkv_prepare(qkv, prepare.q_norm, prepare.k_norm, prepare.eps, prepare.cos_sin, prepare.rotary_dim, cache, batch,
                q_scratch);
    attention(q_scratch, cache, batch, params, out);
  }
  // out = a + b (elementwise, same shape); out may alias a.
  virtual void add(const Tensor& a, const Tensor& b, Tensor out) = 0;
  // gate_up [T, 2I] (gate | up halves) -> out [T, I] = silu(gate) * up
  virtual void silu_mul(const Tensor& gate_up, Tensor out) = 0;
  // out [T, I] = silu_mul(x . gate_up^T), the SwiGLU input of a dense MLP; gate_up_out [T, 2I] is scratch. Backends
  // may fuse both steps (CUDA: one GEMV pass for decode batches); the default runs linear() then silu_mul().
  virtual void linear_silu_mul(const Tensor& x, const LinearWeight& gate_up, Tensor gate_up_out, Tensor out) {
    linear(x, gate_up, Tensor(), gate_up_out);
    silu_mul(gate_up_out, out);
  }
  // out [R, H] = x[rows[r]]
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor out) = 0;
  // out[rows[t], column : column + W] = x[t] for x f32 [T, W], out f32 [N, D]; negative rows are skipped.
  virtual void scatter_rows(const Tensor& x, const Tensor& rows, Tensor out, int64_t column) = 0;
  // Router: logits [T, E] -> ids i32 [T, k], weights f32 [T, k] (ties: lower expert id first).
  virtual void moe_route(const Tensor& logits, MoeRouting routing, bool renormalize, Tensor ids, Tensor weights) = 0;
  // out [T, H] = sum_k weights[t,k] * expert_{ids[t,k]}(x[t]), summed in ascending expert id.
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeWeights& experts,
                           Tensor out) = 0;

  // moe_route then moe_experts: logits [T, E] -> ids, weights (as moe_route writes them) and out. Backends may fuse
  // the router's top-k with their grouping of tokens by expert (CUDA: one launch for decode batches).
  virtual void moe(const Tensor& x, const Tensor& logits, MoeRouting routing, bool renormalize,
                   const MoeWeights& experts, Tensor ids, Tensor weights, Tensor out) {
    moe_route(logits, routing, renormalize, ids, weights);
    moe_experts(x, ids, weights, experts, out);
  }

  // ---- gated delta net (linear attention) and gates of the hybrid Qwen models. Backends without them keep the
  // defaults, which throw; a hybrid model checks supports_recurrent_state() when it loads. ----
  virtual bool supports_recurrent_state() const { return false; }
  // Causal depthwise conv1d + SiLU over each sequence's tokens, continuing from its rolling conv state and leaving
  // the last K-1 inputs there: x [T, C] -> out [T, C]; weight f32 [C, K]; conv_state f32 [slots, C, K-1].
  virtual void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor conv_state, const StateBatchView& batch,
                             Tensor out);
  // The gated delta rule over each sequence's tokens, from and into its state f32 [slots, nv, dk, dv].
  // qkv [T, 2 nk dk + nv dv] (conv output, q | k | v), ba [T, 2 nv] (b | a before activation), a_log and dt_bias
  // f32 [nv] -> out [T, nv * dv]. q and k are L2-normalised (eps 1e-6), q scaled by dk^-0.5, beta = sigmoid(b),
  // g = -exp(a_log) * softplus(a + dt_bias). Several tokens of a sequence run the chunked form (chunks of 64 from
  // the step's first token), one token the recurrent form; both equal transformers' torch reference.
  virtual void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log, const Tensor& dt_bias,
                                Tensor state, const StateBatchView& batch, const GatedDeltaNetParams& params,
                                Tensor out);
  // out = x * rsqrt(mean(x^2) + eps) * weight * silu(z), row-wise; x, z, out [rows, d], weight [d] (plain, not 1+w).
  virtual void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out);
  // out = x * sigmoid(gate); gate [T, W] like x [T, W], or [T, 1] (one gate per row). out may alias x.
  virtual void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor out);

  // Picks one token per row of logits [R, vocab] (f32 on this device, overwritten as scratch) as sample_on_host does;
  // out[r] is filled on the host when this returns. Only the picks (and requested logprobs) leave the device.
  virtual void sample(Tensor logits, std::span<const SampleSpec> specs, std::span<SampledToken> out) = 0;
  // Structured output: logits [R, vocab] f32 on this device; bitmask [R, ceil(vocab / 32)] u32 words on this device,
  // bit (v % 32) of word v / 32 set when token v is allowed. Disallowed logits become -inf. The default copies the
  // rows through the host (correct anywhere, slow); backends override it with a kernel.
  virtual void apply_token_bitmask(Tensor logits, const Tensor& bitmask);
};

struct BackendOptions {
  int num_threads = 0;     // CPU: 0 = all cores
  bool exact_f32 = false;  // keep every product in f32 (CPU: no bf16 x bf16 GEMM; CUDA: bf16 GEMMs on hi/lo splits)
  // CUDA attention kernel: "auto" or "flash" (tensor cores wherever they apply: a bf16 cache, head_dim 64/128, not in
  // exact mode) or "cuda-core" (never tensor cores).
  std::string attention = "auto";
  // CUDA: launch kernels with programmatic dependent launch on sm_90+ (each kernel's launch and weight prefetch overlap
  // the previous kernel's tail); off only to measure what it buys.
  bool programmatic_launch = true;
  // Batch-invariant numerics (--enable-deterministic-inference): a row's result never depends on which other rows
  // share its step (no token-count-dependent kernel choice), so a seeded request gives the same output alone or in
  // any batch, and a speculative verify pass the same logits as decode steps. CUDA: one GEMM kernel for every row
  // count, attention without key splits in one tile shape, the recurrent delta rule (slower; measured in
  // docs/notes/cuda-decode.md).
  bool deterministic = false;
};

// "cpu" or "cuda[:N]". Throws naming the known backends when the name is unknown or not built in.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});

}  // namespace rs
