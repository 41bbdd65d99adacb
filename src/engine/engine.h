// Engine: one device's model execution. Owns Backend, Model weights, KvPool and Sampler; forward() runs one step.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "engine/forward_batch.h"
#include "kv/kv_pool.h"
#include "loader/hf_config.h"
#include "loader/weight_source.h"

namespace rs::model {
class Model;
}

namespace rs::engine {

// Element type of the KV cache. kAuto: the weights' dtype (bf16 checkpoints keep bf16 K/V), f32 with exact_f32.
enum class KvCacheDtype : uint8_t { kAuto, kBf16, kF32 };

struct EngineConfig {
  std::string backend = "cpu";       // "cpu" | "cuda[:N]"
  int32_t num_threads = 0;           // CPU threads; 0 = all cores
  bool exact_f32 = false;            // CPU: exact f32 products even for bf16 weights (reference numerics)
  std::string load_format = "auto";  // "auto" (safetensors) | "dummy" (seeded random weights)
  uint64_t dummy_seed = 0;
  int32_t page_size = 16;             // tokens per KV page
  double kv_cache_gb = 0.0;           // 0 = derive from context_length * max_running_requests
  int32_t max_running_requests = 16;  // used to size sliding-window KV groups
  int64_t max_step_tokens = 2048;     // most tokens one step may carry (the chunked-prefill budget)
  int64_t context_length = 0;         // 0 = the model's max_position_embeddings
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  std::function<void(const std::string& what, double fraction)> progress;  // loading progress, may be empty
};

class Engine {
 public:
  // Loads the model in model_dir (config.json + safetensors, or dummy weights) and allocates the KV pool.
  Engine(const std::filesystem::path& model_dir, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const loader::ModelConfig& model_config() const { return model_config_; }
  const EngineConfig& config() const { return config_; }
  kv::KvPool& kv_pool() { return *kv_pool_; }
  Backend& backend() { return *backend_; }
  int64_t context_length() const { return context_length_; }
  // Bytes of weights as stored (quantized formats counted packed).
  size_t weight_bytes() const { return weights_->bytes_loaded(); }

  // Runs the model over `batch` (writing its K/V into the pool) and samples one token per logit row.
  // keep_logits also returns the raw logits of the logit rows. Called from one thread at a time (the scheduler).
  StepOutput forward(const ForwardBatch& batch, bool keep_logits = false);

 private:
  EngineConfig config_;
  loader::ModelConfig model_config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<loader::WeightSource> weights_;  // owns the mmap (or dummy buffers) the model views
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<kv::KvPool> kv_pool_;
  int64_t context_length_ = 0;
};

}  // namespace rs::engine
