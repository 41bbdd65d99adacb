// Engine: one device's model execution. Owns Backend, Model weights, KvPool and Sampler; forward() runs one step.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "engine/forward_batch.h"
#include "loader/hf_config.h"
#include "loader/weight_source.h"
#include "memory/kv_pool.h"
#include "memory/state_pool.h"

namespace rs::model {
class Model;
struct HiddenTaps;
struct StepMemory;
}  // namespace rs::model

namespace rs::engine {

class StepStaging;

// A step whose forward Engine::launch enqueued; Engine::sample turns it into tokens. Refers to the batch, which must
// outlive it.
struct StepHandle {
  const ForwardBatch* batch = nullptr;
  bool keep_logits = false;
};

// Element type of the KV cache. kAuto: the weights' dtype (bf16 checkpoints keep bf16 K/V), f32 with exact_f32.
enum class KvCacheDtype : uint8_t { kAuto, kBf16, kF32, kFp8E4M3 };

struct EngineConfig {
  std::string backend = "cpu";       // "cpu" | "cuda[:N]"
  int32_t num_threads = 0;           // CPU threads; 0 = all cores
  bool exact_f32 = false;            // CPU: exact f32 products even for bf16 weights (reference numerics)
  std::string load_format = "auto";  // "auto" (safetensors) | "dummy" (seeded random weights)
  std::string quantization;          // --quantization: "" or "fp8" (dense projections become FP8 as they load)
  // --task: "generate", "embed" (each step returns its rows' final-normed hidden states: StepOutput::embeddings), or
  // "auto" (embed when the checkpoint is an embedding model: ModelConfig::embedding_detected).
  std::string task = "auto";
  uint64_t dummy_seed = 0;
  int32_t page_size = 16;             // tokens per KV page
  double kv_cache_gb = 0.0;           // 0 = derive from context_length * max_running_requests
  int32_t max_running_requests = 16;  // used to size sliding-window KV groups
  int64_t max_step_tokens = 2048;     // most tokens one step may carry (the chunked-prefill budget)
  int64_t context_length = 0;         // 0 = the model's max_position_embeddings
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  // Recurrent-state slots of hybrid (gated-delta-net) models, one per running request and the rest for prefix-cache
  // snapshots; 0 = auto: twice max_running_requests, but no more than half the memory budget holds. Ignored for
  // models without such layers.
  int32_t num_state_slots = 0;
  // Auto-sized state pools add this many slots (speculative decoding: a checkpoint per draft token of each sequence
  // that verifies, for rolling rejected tokens back).
  int32_t extra_state_slots = 0;
  // On a GPU, the KV pool gets what is left of this fraction of device memory after the weights (SGLang's
  // --mem-fraction-static); the rest is for activations, graphs and the runtime. Ignored on CPU and with kv_cache_gb.
  double mem_fraction_static = 0.85;
  // Decode steps of up to this many sequences replay CUDA graphs (batch padded to the next recorded size);
  // -1 = max_running_requests, 0 = off. Backends without graphs run every step eagerly.
  int32_t cuda_graph_max_batch = -1;
  // --tensor-parallel-size: the model split over this many ranks (model/tensor_parallel.h; CPU ranks in this process
  // for now, each with num_threads / N threads and a KV pool of its own share of the KV heads).
  int32_t tensor_parallel_size = 1;
  // --expert-parallel: MoE experts stay whole, a block of them per rank (attention and dense layers still split).
  bool expert_parallel = false;
  std::string attention_backend = "auto";  // CUDA attention kernel: auto | flash | cuda-core (BackendOptions)
  bool programmatic_launch = true;         // CUDA: BackendOptions::programmatic_launch
  bool deterministic = false;              // batch-invariant numerics (BackendOptions::deterministic)
  // EAGLE-3 targets: the layer entries whose residual stream the model writes into the feature cache (see
  // model::HiddenTaps), for a draft head to read; empty = none.
  std::vector<int32_t> capture_hidden_layers;
  std::function<void(const std::string& what, double fraction)> progress;  // loading progress, may be empty
};

// The element type of the KV cache for `config` and `model`: kAuto stores K/V as the weights are (bf16 checkpoints
// keep bf16 K/V), except in exact-f32 mode, whose point is reference numerics.
DType kv_cache_dtype(const EngineConfig& config, const loader::ModelConfig& model);

// The shape of one recurrent-state slot of `model` (empty when it has no gated-delta-net layers).
memory::StateGeometry state_geometry_of(const loader::ModelConfig& model);

class Engine {
 public:
  // Loads the model in model_dir (config.json + safetensors, or dummy weights) and allocates the KV pool.
  Engine(const std::filesystem::path& model_dir, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const loader::ModelConfig& model_config() const { return model_config_; }
  const EngineConfig& config() const { return config_; }
  memory::KvPool& kv_pool() { return *kv_pool_; }
  const memory::KvPool& kv_pool() const { return *kv_pool_; }
  // Recurrent-state slots (0 slots for models without gated-delta-net layers).
  const memory::StatePool& state_pool() const { return *state_pool_; }
  Backend& backend() { return *backend_; }
  int64_t context_length() const { return context_length_; }
  // Bytes of weights as stored (quantized formats counted packed).
  size_t weight_bytes() const;
  size_t weight_bytes_if(const std::function<bool(std::string_view)>& pred) const {
    return weights_->bytes_loaded_if(pred);
  }

  // A step in two phases, so that host work overlaps the device's forward. launch() stages `batch` and enqueues the
  // model over it (writing its K/V into the pool); sample() then samples one token per logit row on the device,
  // reading the batch's sampling rows only now (the scheduler fills their grammar masks in between). keep_logits
  // also returns the raw logits of the logit rows. One step at a time, from one thread (the scheduler): a launch
  // whose step was never sampled waits for it first. sample() returns once the device has finished the step: another
  // engine on the same device may then read its buffers (an EAGLE-3 head reads hidden_features() on its own stream);
  // overlapped scheduling would need an event instead.
  StepHandle launch(const ForwardBatch& batch, bool keep_logits = false);
  StepOutput sample(const StepHandle& step);
  // launch() then sample().
  StepOutput forward(const ForwardBatch& batch, bool keep_logits = false) { return sample(launch(batch, keep_logits)); }
  // Batch sizes whose decode steps replay a recorded graph (empty when graphs are off or unsupported).
  std::vector<int32_t> graph_batch_sizes() const { return graph_sizes_; }
  model::Model& model() { return *model_; }
  // EAGLE-3 targets (capture_hidden_layers): f32 [slots of KV group feature_group(), layers x hidden], row = KV slot.
  Tensor hidden_features() const { return features_; }
  int32_t feature_group() const { return feature_group_; }

 private:
  // Sizes the KV pool (and the state pool beside it) from the config, the model and the device's memory.
  size_t kv_budget_bytes(const memory::KvPoolConfig& kv_config, const memory::StateGeometry& state) const;
  // Allocates the state pool out of `budget` (reduced by what it takes) and logs the memory plan.
  void create_state_pool(const memory::StateGeometry& geometry, size_t& budget);
  // Grows the logits buffer to `rows` rows; true when it moved.
  bool reserve_logits(int32_t rows);
  // A key that changes whenever memory a recorded graph reads moves.
  uint64_t memory_epoch() const;
  // Records decode graphs for every size in graph_sizes_ (each run once eagerly first, so scratch is sized).
  void capture_decode_graphs();
  void run_largest_step();  // eagerly, before recording graphs (sizes the backend's scratch)
  // Before the KV pool is sized: runs the largest step and a sampled decode step of --max-running-requests sequences
  // on a pool of one page, so the backend's scratch is allocated first and the KV budget is what remains.
  void profile_memory(const memory::KvPoolConfig& kv_config, const memory::StateGeometry& state_geometry);
  // Refuses, before anything is loaded, weights that cannot fit in the device's free memory (weight_plan.h).
  void check_weights_fit(const std::filesystem::path& model_dir) const;
  void allocate_feature_cache();  // capture_hidden_layers: features_ beside the KV pool
  void apply_kv_cache_scales();   // an fp8 KV pool: the checkpoint's per-layer k_scale / v_scale
  // The recorded size a decode step of `seqs` sequences pads to, or 0 when the step runs eagerly.
  int32_t graph_size_for(const ForwardBatch& batch) const;
  // Adds each row's logit_bias / min_tokens ban (engine/sampler.h) to its logits, rows without one untouched.
  void adjust_logits(Tensor logits, const std::vector<SamplingRow>& rows);
  // The rows with a score_target (prompt logprobs), scored on the host from the raw logits: {row, result}.
  std::vector<std::pair<size_t, SampledToken>> score_rows(const Tensor& logits, const std::vector<SamplingRow>& rows);
  // Applies the rows' token bitmasks (structured output) on the device, when any row has one.
  void apply_token_bitmasks(Tensor logits, const std::vector<SamplingRow>& rows);

  EngineConfig config_;
  loader::ModelConfig model_config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<loader::WeightSource> weights_;  // owns the mmap (or dummy buffers) the model views
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<memory::KvPool> kv_pool_;
  std::unique_ptr<memory::StatePool> state_pool_;
  std::unique_ptr<model::StepMemory> memory_;  // views kv_pool_ and state_pool_
  int64_t context_length_ = 0;
  std::unique_ptr<StepStaging> staging_;
  int64_t reserved_tokens_ = 0;
  Buffer logits_;
  int32_t logits_rows_ = 0;
  uint64_t logits_epoch_ = 0;
  bool profiling_ = false;                  // profile_memory() is running its steps
  const ForwardBatch* launched_ = nullptr;  // the step launch() enqueued and sample() has not taken yet
  std::vector<int32_t> graph_sizes_;
  std::map<int32_t, std::unique_ptr<BackendGraph>> graphs_;
  uint64_t graphs_epoch_ = 0;  // memory_epoch() when graphs_ were recorded
  Buffer features_buffer_;
  Tensor features_;
  std::unique_ptr<model::HiddenTaps> taps_;  // the model writes features_ through these (StepInputs::taps)
  int32_t feature_group_ = -1;
  Buffer adjustment_row_;  // [vocab] f32 on the device, allocated on first use
  std::vector<float> adjustment_host_;
  std::vector<float> score_host_;  // one logit row on the host (score_rows)
  Buffer bitmask_device_;          // [rows, ceil(vocab / 32)] u32, grown to the largest constrained step
  std::vector<uint32_t> bitmask_host_;
  // Tensor parallelism: the KV pools of ranks 1..N-1 (rank 0's is kv_pool_), on their ranks' backends; destroyed
  // before the model that owns those backends. Their slots and pages follow rank 0's (the scheduler's) one for one.
  std::vector<std::unique_ptr<memory::KvPool>> rank_kv_pools_;
  std::vector<std::unique_ptr<memory::StatePool>> rank_state_pools_;  // gated-delta-net state of ranks 1..N-1
};

}  // namespace rs::engine
