// Launchers of the CUDA kernels, one op family per .cu file. Raw device pointers in, work enqueued on `stream`.
// Kernels that find bad input (an id out of range) set a bit in `error_flags` instead of faulting; the backend turns it
// into rs::Error at synchronize().
#pragma once

#include <cuda_runtime.h>
#include <vector_types.h>

#include <cstdint>

namespace rs::cuda {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Element types that float-valued parameters (norm weights, biases, sinks, embedding tables) may be stored in.
enum class ElemType : int32_t { kF32, kBF16, kF16 };

// Element type of a paged KV cache. kFp8: e4m3 codes, one scale per tensor per layer (x = code x scale).
enum class KvType : int32_t { kF32, kBF16, kFp8 };

// Storage format of a linear weight [out, in]. kFp8: E4M3 codes times f32 block scales (GroupedWeights::fp8).
// kInt4 / kInt8: unsigned codes packed little-endian along `in`, w = scale * q + bias per group
// (GroupedWeights::affine; LinearWeight::kAffine: MLX, AWQ, GPTQ). kInt4Tiled: int4 codes re-tiled for the GEMV (see
// launch_tile_int4).
enum class WeightFormat : int32_t { kF32, kBF16, kF16, kMxfp4, kFp8, kInt4, kInt8, kInt4Tiled };

// Bits of the device error word.
enum ErrorFlag : uint32_t {
  kErrTokenId = 1u << 0,     // embedding: id outside the vocabulary
  kErrPosition = 1u << 1,    // rope: position beyond the table
  kErrKvSlot = 1u << 2,      // store_kv: slot beyond the cache
  kErrExpertId = 1u << 3,    // moe: expert id out of range
  kErrAbsentPage = 1u << 4,  // attention: page table entry < 0 inside the attended range
};

// ---- elementwise.cu ----
void launch_embedding(const void* table, ElemType table_type, int64_t vocab, int64_t hidden, const int32_t* ids,
                      int64_t num_tokens, float* out, uint32_t* error_flags, cudaStream_t stream);
// The row-wise producers of GEMM inputs (rms_norm, add_rms_norm, silu_mul) write `out` as f32 or, with out_bf16, as
// bf16 rounded to nearest even (f32 arithmetic either way).
void launch_rms_norm(const float* x, const void* weight, ElemType weight_type, int64_t rows, int64_t width, float eps,
                     bool add_one, void* out, bool out_bf16, cudaStream_t stream);
void launch_add(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream);
// gate_up [rows, 2*inter] (gate | up) -> out [rows, inter]
void launch_silu_mul(const float* gate_up, int64_t rows, int64_t inter, void* out, bool out_bf16, cudaStream_t stream);
// gate_up [rows, 2*inter] interleaved (gate, up) pairs -> out [rows, inter], gpt-oss clamped SwiGLU
void launch_clamped_swiglu(const float* gate_up, int64_t rows, int64_t inter, float alpha, float limit, float* out,
                           cudaStream_t stream);
// out[rows[t] * out_width + i] = x[t * width + i] (out already offset to its first column); negative rows skipped,
// rows past out_rows flag kErrKvSlot.
void launch_scatter_rows(const float* x, const int32_t* rows, int64_t num_rows, int64_t width, float* out,
                         int64_t out_width, int64_t out_rows, uint32_t* error_flags, cudaStream_t stream);
void launch_gather_rows(const float* x, const int32_t* rows, int64_t num_rows, int64_t width, float* out,
                        cudaStream_t stream);
// out [rows, features] += bias[features]
void launch_add_bias(float* out, int64_t rows, int64_t features, const void* bias, ElemType bias_type,
                     cudaStream_t stream);
// x [rows, width] f32 -> hi, lo bf16 with hi + lo = x to ~2^-17 relative (two-term split for bf16 tensor-core GEMM);
// lo may be null (x rounded to bf16 once, the fast path).
void launch_split_bf16(const float* x, int64_t count, void* hi, void* lo, cudaStream_t stream);

// ---- rope.cu ----
void launch_rope(float* x, int64_t num_tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                 const float* cos_sin, int64_t max_positions, int32_t rotary_dim, uint32_t* error_flags,
                 cudaStream_t stream);

// ---- qkv.cu ----
// x [rows, width] += delta; out = rms_norm(x) with weight (1 + w when add_one).
void launch_add_rms_norm(float* x, const float* delta, const void* weight, ElemType weight_type, int64_t rows,
                         int64_t width, float eps, bool add_one, void* out, bool out_bf16, cudaStream_t stream);
// out = rms_norm(x) through add_rms_norm's vectorised kernel (no add, x unchanged) where the row shape and alignment
// allow it; returns false, doing nothing, otherwise.
bool launch_rms_norm_vec(const float* x, const void* weight, ElemType weight_type, int64_t rows, int64_t width,
                         float eps, bool add_one, void* out, bool out_bf16, cudaStream_t stream);

struct QkvPrepareArgs {
  const float* qkv;  // [T, (heads + 2 * kv_heads) * head_dim]
  const void* q_norm;
  const void* k_norm;  // [head_dim] each, or null
  ElemType norm_type;
  float eps;
  const int32_t* positions;  // [T]
  const float* cos_sin;      // [max_positions, rotary_dim]
  int64_t max_positions;
  int32_t rotary_dim;
  const int32_t* slots;  // [T] cache rows; negative: skip
  int64_t cache_rows;
  void* k_cache;  // [rows, kv_heads, head_dim] of cache_type
  void* v_cache;
  KvType cache_type;
  float k_scale, v_scale;  // fp8: stored as x / scale
  float* q_out;            // [T, heads, head_dim]
  uint32_t* error_flags;
  int64_t num_tokens;
  int32_t num_heads, num_kv_heads, head_dim;
};
void launch_qkv_prepare(const QkvPrepareArgs& args, cudaStream_t stream);

// ---- attention.cu ----
void launch_store_kv(const float* k, const float* v, int64_t num_tokens, int64_t row_width, const int32_t* slots,
                     int64_t cache_rows, void* k_cache, void* v_cache, KvType cache_type, float k_scale, float v_scale,
                     uint32_t* error_flags, cudaStream_t stream);

struct AttentionArgs {
  const float* q;       // [T, heads, hd]
  const void* k_cache;  // [rows, kv_heads, hd] of cache_type
  const void* v_cache;
  KvType cache_type;
  float k_scale, v_scale;          // fp8: a cache value is its e4m3 code x scale
  const int32_t* positions;        // [T]
  const int32_t* token_seq;        // [T]
  const int32_t* page_table;       // [S, max_pages]
  const int32_t* seq_token_start;  // [S + 1] first token of each sequence (flash kernel only)
  const void* sinks;               // [heads] or null
  ElemType sinks_type;
  float* out;                // [T, heads * hd]
  float* partial;            // [T, heads, splits, hd + 2] when splits > 1
  uint32_t* split_counters;  // flash kernel with splits > 1: zeroed words, one per (tile, KV head) of the grid
  int64_t split_counter_words;
  uint32_t* error_flags;
  int32_t num_tokens, num_seqs, num_heads, num_kv_heads, head_dim, page_size, max_pages, window, splits;
  int32_t page_shift;  // log2(page_size) when a power of two, else -1
  float scale;
  // Batch-invariant numerics: no key splits (splits == 1) and, in the flash kernel, one tile shape for every row, so
  // a row's sums run over the same key tiles in the same order in a decode step, a prefill chunk or a mixed step.
  bool batch_invariant;
  // Decode steps of the flash kernel (one token per sequence, at most 16 query heads per KV head): with prepare.qkv
  // set, q comes from the raw projection instead (prepare_head per block, never stored), and the block that reads the
  // new token's key tile first stores that token's k and v into the cache: qkv_prepare and attention in one launch.
  QkvPrepareArgs prepare;
};
// Chooses the key-split count (flash-decoding) from the shape and a bound on the key range (each token splits its own
// range evenly); returns the floats of `partial` it needs (0: none).
int64_t attention_partial_floats(int32_t num_tokens, int32_t num_heads, int32_t head_dim, int32_t max_kv_len,
                                 int32_t window, int32_t num_sms, int32_t* splits);
void launch_attention(const AttentionArgs& args, cudaStream_t stream);
// Merges key splits written to args.partial by attention_kernel into args.out, adding the sinks.
void launch_attention_combine(const AttentionArgs& args, cudaStream_t stream);

// ---- tensor-core attention (flash_attention.cu): bf16 or fp8 cache, head_dim 64/128/256, GQA groups of at most 64
// ----
bool flash_attention_supported(int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, KvType cache_type);
// Query rows per tile (64 or 128) and an upper bound on the tiles of a batch (the grid).
int32_t flash_attention_rows(int32_t num_tokens, int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                             int32_t head_dim);
int32_t flash_attention_tiles(int32_t num_tokens, int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                              int32_t rows);
// As attention_partial_floats, for the flash kernel's blocks (query tiles x KV heads); returns a bound that depends
// only on head_dim and the device, so the partial buffer is allocated once.
int64_t flash_attention_partial_floats(int32_t num_tokens, int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                                       int32_t head_dim, int32_t max_kv_len, int32_t window, int32_t num_sms,
                                       int32_t* splits);
// Needs args.seq_token_start and args.num_seqs; tokens of a sequence are consecutive in the batch. With key splits,
// the last block of each tile to finish merges the splits (no combine kernel) and needs args.split_counters.
void launch_flash_attention(const AttentionArgs& args, cudaStream_t stream);

// ---- linear: gemv.cu (few rows) and gemm_tiled.cu (any rows), both over "row chunks" of one weight group ----
// FP8 block scales of one weight: element (o, i) scales by scales[(o / block_rows) * cols + (i / 16) >> vec_shift],
// the scale of i's 16-element vector (block_cols is a multiple of 16: a power of two, or the whole row with
// vec_shift large enough to give column 0).
struct Fp8Scales {
  const float* scales = nullptr;
  int64_t cols = 0;
  int32_t block_rows = 1;
  int32_t vec_shift = 0;
};

// Integer weights' (scale, bias) pairs [out, groups]: element (o, i) reads pairs[o * groups + (v >> vec_shift)], v
// the index of i's 16-byte vector (a group holds 2^vec_shift whole vectors).
// kInt4Tiled reads the pair of input i as pairs[o * groups + (i >> group_shift)] (power-of-two groups).
struct AffineScales {
  const float2* pairs = nullptr;
  int64_t groups = 0;
  int32_t vec_shift = 0;
  int32_t group_shift = 0;
};

struct GroupedWeights {
  const void* weight = nullptr;               // single group: [out, in] (or MXFP4 blocks [out, in/32, 16])
  Fp8Scales fp8;                              // single group FP8
  AffineScales affine;                        // single group kInt4 / kInt8
  const uint8_t* scales = nullptr;            // single group MXFP4 scales [out, in/32]
  const void* const* weight_table = nullptr;  // per-group device pointer arrays (MoE experts); override the above
  const uint8_t* const* scale_table = nullptr;
  // PairActivation::kSilu over two weights: gate rows come from weight(_table), up rows from these (same shape).
  const void* const* up_table = nullptr;
  const uint8_t* const* up_scale_table = nullptr;
  const void* bias = nullptr;  // [groups, out] or [out]
  ElemType bias_type = ElemType::kF32;
  int64_t bias_group_stride = 0;  // elements between consecutive groups' biases
};

// Activation rows are processed in chunks of consecutive rows that share one weight group. Either implicit (chunks of
// `chunk_rows` over [0, total_rows), group 0) or an explicit device list of int4 {group, first_row, row_count, 0}.
struct RowChunks {
  const int4* list = nullptr;
  const int32_t* count = nullptr;  // device: number of valid entries of list
  int32_t max_chunks = 0;          // grid bound
  int32_t chunk_rows = 0;
  int64_t total_rows = 0;
};

// Gated activations fused into a linear's output: out[r, j] = act(gate_j . x_r, up_j . x_r). Weight rows come in
// (gate, up) pairs: rows 2j and 2j + 1 of one weight (gpt-oss stores gate_up interleaved), or, with
// GroupedWeights::up_table, row j of the gate weight and row j of the up weight (Qwen3-MoE's separate projections).
enum class PairActivation : int32_t {
  kNone,
  kSilu,           // silu(g) * u
  kClampedSwiGlu,  // g = min(g, limit), u = clamp(u, -limit, limit), (u + 1) * g * sigmoid(alpha g) (gpt-oss)
};

struct LinearArgs {
  const float* x;  // activations, row stride x_stride
  int64_t x_stride;
  const int32_t* x_rows;  // row r reads x[x_rows[r]] (gather), or null: x[r]
  float* out;             // row r writes out[r * out_stride + o]
  int64_t out_stride;
  int64_t in_features, out_features;
  WeightFormat format;
  GroupedWeights w;
  RowChunks rows;
  // GEMV only, > 0: gated output out[o] = silu(x . W[o]) * (x . W[o + glu_offset]) for o < out_features (SwiGLU's
  // gate | up halves in one weight; out_features = glu_offset).
  int64_t glu_offset = 0;
  // GEMV and tensor-core GEMM: gated output pairs; out_features counts outputs (half the weight rows).
  PairActivation pair_act = PairActivation::kNone;
  float swiglu_alpha = 0.0f, swiglu_limit = 0.0f;
};

// Rows per chunk the GEMV kernel handles (weights are read once per chunk); dense linears in the bf16 fast path use it
// for up to kGemvFastMaxRows rows and cuBLAS beyond.
constexpr int32_t kGemvMaxRows = 8;
constexpr int32_t kGemvFastMaxRows = 2;
// Whether the vectorised GEMV applies: in_features divisible by the 16-byte vector's elements, x and its rows 16-byte
// aligned, and the weight 16-byte aligned (weight == nullptr: a per-group table, checked when it was built).
bool gemv_supported(WeightFormat format, int64_t in_features, const float* x, int64_t x_stride, const void* weight);
void launch_gemv(const LinearArgs& args, int32_t rows_per_chunk, cudaStream_t stream);

constexpr int32_t kTiledRows = 64;
void launch_gemm_tiled(const LinearArgs& args, cudaStream_t stream);

// ---- fp8.cu ----
// out [out, in] bf16 = the FP8 weight's values times their block scales, rounded once (cuBLAS reads it for many rows).
void launch_dequantize_fp8(const uint8_t* codes, const Fp8Scales& scales, int64_t out_features, int64_t in_features,
                           void* out_bf16, cudaStream_t stream);
// out [out, in] (bf16, or f32 with out_f32) = scale * q + bias of an integer weight: `bits`-bit codes packed
// little-endian along `in` ([out, in * bits / 8] bytes; with `tiled`, 4-bit codes in kInt4Tiled's layout), pairs f32
// [out, in / group, 2]. in % group == 0, a group holds whole bytes.
void launch_dequantize_affine(const uint8_t* codes, const float* pairs, int32_t bits, int64_t group,
                              int64_t out_features, int64_t in_features, void* out, bool out_f32, bool tiled,
                              cudaStream_t stream);
// out [T, in] = rows ids[t] of an integer table (codes [vocab, in * bits / 8], pairs f32 [vocab, in / group, 2]),
// exactly dequantized (s q + b, one rounding); ids outside [0, vocab) flag kErrTokenId and give zeros.
void launch_embedding_affine(const uint8_t* codes, const float* pairs, int32_t bits, int64_t group, int64_t vocab,
                             int64_t in_features, const int32_t* ids, int64_t num_tokens, float* out,
                             uint32_t* error_flags, cudaStream_t stream);
// out [rows, cols] = x[r, order[c]] (x rows of x_stride floats): activations in a weight's input_order.
void launch_gather_columns(const float* x, int64_t rows, int64_t cols, int64_t x_stride, const int32_t* order,
                           float* out, cudaStream_t stream);
// int4 codes [out, in / 2] -> kInt4Tiled's layout (in % 1024 == 0): in each 1,024-input tile, the 16 bytes of lane l
// (0..31) hold inputs wi * 256 + j * 128 + l * 4 + c (word wi 0..3, half j 0..1, c 0..3) at byte wi * 4 + 2j + c / 2,
// nibble c % 2. A warp's 32 lanes then read each activation float4 from 512 contiguous bytes (4 cache lines) instead
// of 32 lines, 128 bytes apart. `tiled` must not alias `codes`.
void launch_tile_int4(const uint8_t* codes, int64_t out_features, int64_t in_features, uint8_t* tiled,
                      cudaStream_t stream);
// x [rows, cols] f32 -> E4M3 codes [rows, cols] and a scale per row and group of `group` columns, at
// scales[row * row_pitch + group_index * group_pitch]: amax / 448 (1 for an all-zero group), codes rounded to nearest,
// saturating. cols % group == 0, group % 4 == 0.
void launch_quantize_fp8_groups(const float* x, int64_t rows, int64_t cols, int64_t group, uint8_t* codes,
                                float* scales, int64_t row_pitch, int64_t group_pitch, cudaStream_t stream);
// out [rows, cols] f32 = raw [rows, cols] (f32, may alias out, or bf16) * row_scales[r] * col_scales[c].
void launch_scale_outer(const void* raw, bool raw_bf16, int64_t rows, int64_t cols, const float* row_scales,
                        const float* col_scales, float* out, cudaStream_t stream);
// out [count] f32 = in [count] bf16.
void launch_widen_bf16(const void* in, int64_t count, float* out, cudaStream_t stream);

// ---- gemv_mma.cu: MXFP4 and int4 GEMV on tensor cores (bf16 activations, f32 accumulation; the fast path) ----
// Chunks of 1-8 activation rows; plain, glu_offset or pair-activation outputs, like launch_gemv.
constexpr int64_t kGemvMmaMaxSmem = 96 * 1024;  // the staged activation rows (rows x in_features bf16)
bool gemv_mma_supported(WeightFormat format, int64_t in_features, const float* x, int64_t x_stride,
                        int32_t rows_per_chunk);
void launch_gemv_mma(const LinearArgs& args, int32_t rows_per_chunk, cudaStream_t stream);

// ---- gemm_mma.cu: grouped GEMM on tensor cores (bf16 activations, f32 accumulation), bf16 or MXFP4 weights ----
// Row chunks of at most kMmaRows rows; any pair activation; the bf16 fast path (activations rounded to bf16).
constexpr int32_t kMmaRows = 64;
// Whether launch_gemm_mma takes this shape: bf16 (in % 8 == 0) or MXFP4 weights, x and its row stride 16-byte
// aligned (weight == nullptr: a per-group table, checked when it was built).
bool gemm_mma_supported(WeightFormat format, int64_t in_features, const float* x, int64_t x_stride, const void* weight);
void launch_gemm_mma(const LinearArgs& args, cudaStream_t stream);

// ---- moe.cu ----
// logits [T, E] -> ids [T, k], weights [T, k]; softmax_first: kSoftmaxTopK (then optional renormalisation), else
// top-k logits then softmax over them.
void launch_moe_route(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool softmax_first,
                      bool renormalize, int32_t* ids, float* weights, cudaStream_t stream);
// Groups the T*k (token, slot) pairs by expert: pos_of_slot [T*k] (row of each pair in expert order, -1 if its id is
// bad), x_row_of_pos [T*k] (token of each row), chunks [max_chunks] of up to chunk_rows rows of one expert,
// *num_chunks.
void launch_moe_sort(const int32_t* ids, int64_t num_slots, int32_t top_k, int32_t num_experts, int32_t chunk_rows,
                     int32_t* pos_of_slot, int32_t* x_row_of_pos, int4* chunks, int32_t* num_chunks,
                     uint32_t* error_flags, cudaStream_t stream);
// launch_moe_route then launch_moe_sort as one single-block launch, for decode batches (moe_route_sort_fusable).
bool moe_route_sort_fusable(int64_t num_tokens, int32_t num_experts);
void launch_moe_route_sort(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k,
                           bool softmax_first, bool renormalize, int32_t* ids, float* weights, int32_t chunk_rows,
                           int32_t* pos_of_slot, int32_t* x_row_of_pos, int4* chunks, int32_t* num_chunks,
                           uint32_t* error_flags, cudaStream_t stream);
// out[t] = sum over its k slots in ascending expert id of weights[t, i] * y[pos_of_slot[t*k+i]]
void launch_moe_combine(const float* y, const int32_t* ids, const float* weights, const int32_t* pos_of_slot,
                        int64_t num_tokens, int32_t top_k, int64_t hidden, float* out, cudaStream_t stream);

// ---- sample.cu ----
// Sampling with the reference semantics of backend/sampling.h (sample_on_host), one row of logits per block.
constexpr int32_t kSampleMaxTop = 20;  // == rs::kMaxTopLogprobs (checked in cuda_backend.cu)

// Device copy of one row's SampleSpec. Penalties: entries [penalty_begin, penalty_begin + penalty_count) of the
// step's penalty list, int2 {token id, output count}.
struct SampleRowSpec {
  float temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  int32_t top_k, top_logprobs, logprobs, greedy;  // greedy: SampleSpec::greedy(), decided on the host
  int32_t penalty_begin, penalty_count;
  unsigned long long seed, step;
};

struct SampleRowResult {
  int32_t token_id;
  float logprob;  // when spec.logprobs
  int32_t num_top;
  int32_t top_ids[kSampleMaxTop];
  float top_logprobs[kSampleMaxTop];
};

// Device scratch launch_sample needs for `rows` rows of `vocab` logits (bytes; may be 0).
size_t sample_scratch_bytes(int32_t rows, int32_t vocab);
// logits [rows, vocab] f32 (overwritten: penalties are applied in place); specs, penalties, results and scratch are
// device memory.
void launch_sample(float* logits, int32_t rows, int32_t vocab, const SampleRowSpec* specs, const int2* penalties,
                   SampleRowResult* results, void* scratch, cudaStream_t stream);

// ---- gated_delta_net.cu: the hybrid models' linear-attention layers (StateBatchView on the device) ----
struct GdnBatch {
  const int32_t* positions = nullptr;         // [T]
  const int32_t* seq_token_start = nullptr;   // [S + 1]
  const int32_t* state_slots = nullptr;       // [S], -1 = idle row
  const int32_t* checkpoint_slots = nullptr;  // [T] or null: slot that also receives the state after token t
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;  // T
};
struct GdnShape {  // GatedDeltaNetParams: value head h reads key head h / (num_v_heads / num_k_heads)
  int32_t num_k_heads = 0, num_v_heads = 0, k_head_dim = 0, v_head_dim = 0;
};
// x [T, C] -> out [T, C] = silu(causal depthwise conv with weight f32 [C, K]), from and into conv_state
// f32 [slots, C, K - 1] (K <= 8).
void launch_causal_conv1d(const float* x, const float* weight, float* conv_state, const GdnBatch& batch,
                          int64_t channels, int32_t kernel, float* out, cudaStream_t stream);
// The gated delta rule (Backend::gated_delta_rule): the chunked form for steps that prefill, else the recurrent one
// (always with recurrent_only: a state then does not depend on how a prompt was cut into steps); key head dim 16, 32,
// 64 or 128.
bool gated_delta_rule_supported(const GdnShape& shape);
void launch_gated_delta_rule(const float* qkv, const float* ba, const float* a_log, const float* dt_bias, float* state,
                             const GdnBatch& batch, const GdnShape& shape, float* out, cudaStream_t stream,
                             bool recurrent_only = false);
void launch_gated_rms_norm(const float* x, const float* z, const void* weight, ElemType type, int64_t rows,
                           int64_t width, float eps, float* out, cudaStream_t stream);
// out = x * sigmoid(gate); gate [rows, width] or [rows, 1]
void launch_sigmoid_mul(const float* x, const float* gate, int64_t rows, int64_t width, int64_t gate_width, float* out,
                        cudaStream_t stream);

// ---- gated_delta_chunked.cu ----
// The chunked form alone (chunks of 64 from each sequence's first token in the step); no checkpoints.
void launch_gated_delta_rule_chunked(const float* qkv, const float* ba, const float* a_log, const float* dt_bias,
                                     float* state, const GdnBatch& batch, const GdnShape& shape, float* out,
                                     cudaStream_t stream);

// ---- token_bitmask.cu ----
// logits [rows, vocab] f32: -inf where bit (v % 32) of bitmask[row, v / 32] is clear (bitmask [rows, ceil(vocab/32)]).
void launch_token_bitmask(float* logits, const uint32_t* bitmask, int32_t rows, int32_t vocab, cudaStream_t stream);

}  // namespace rs::cuda
