#include "model/tensor_parallel.h"

#include <atomic>
#include <exception>
#include <thread>

#include "model/decoder.h"

namespace rs::model {

loader::ModelConfig rank_config(const loader::ModelConfig& config, int32_t rank, int32_t size, bool expert_parallel) {
  RS_CHECK(size >= 1 && rank >= 0 && rank < size, "rank {} of {}", rank, size);
  if (size == 1) return config;
  const std::string& arch = config.architecture;
  RS_CHECK(!config.is_eagle3(), "EAGLE-3 draft heads run unsharded: tensor parallelism applies to the target");
  RS_CHECK(!config.embedding, "tensor parallelism serves generation models; {} is an embedding model", arch);
  RS_CHECK(config.quantization.method == loader::QuantMethod::kNone ||
               config.quantization.method == loader::QuantMethod::kMlxAffine ||
               config.quantization.method == loader::QuantMethod::kAwq ||
               config.quantization.method == loader::QuantMethod::kGptq ||
               config.quantization.method == loader::QuantMethod::kFp8 ||
               config.quantization.method == loader::QuantMethod::kCompressedTensors ||
               (config.quantization.method == loader::QuantMethod::kMxfp4 && arch == "GptOssForCausalLM"),
           "tensor parallelism splits f32/bf16/f16, MLX, GGUF, AWQ, GPTQ and FP8 checkpoints; {} weights are not split "
           "yet",
           config.quantization.method_name);
  const auto split = [&](int32_t value, const char* what) {
    RS_CHECK(value % size == 0, "{} {} does not split over {} ranks", what, value, size);
    return value / size;
  };
  loader::ModelConfig out = config;
  out.num_heads = split(config.num_heads, "num_attention_heads");
  RS_CHECK(config.num_kv_heads % size == 0 || size % config.num_kv_heads == 0,
           "{} KV heads cannot be split over {} ranks (one must divide the other)", config.num_kv_heads, size);
  out.num_kv_heads = std::max(config.num_kv_heads / size, 1);
  // Expert parallelism keeps the experts' width: a rank holds whole experts (gpt-oss's are intermediate_size wide).
  const bool gpt_oss = arch == "GptOssForCausalLM";
  if (expert_parallel) {
    RS_CHECK(config.num_experts > 0, "--expert-parallel: {} has no experts", arch);
    split(config.num_experts, "num_experts");
  }
  if (config.intermediate_size > 0 && !(expert_parallel && gpt_oss))
    out.intermediate_size = split(config.intermediate_size, "intermediate_size");
  // gpt-oss's MXFP4 experts: a rank's share of down_proj's inputs must be whole 32-value blocks.
  RS_CHECK(config.quant_method != "mxfp4" || expert_parallel || out.intermediate_size % 32 == 0,
           "{}'s MXFP4 experts split over {} ranks leave {} intermediate values per rank, not whole 32-value blocks",
           arch, size, out.intermediate_size);
  if (config.moe_intermediate_size > 0 && !expert_parallel)
    out.moe_intermediate_size = split(config.moe_intermediate_size, "moe_intermediate_size");
  if (config.shared_expert_intermediate_size > 0)
    out.shared_expert_intermediate_size =
        split(config.shared_expert_intermediate_size, "shared_expert_intermediate_size");
  split(config.vocab_size, "vocab_size");  // the LM head's rows (DecoderModel::head_rows)
  if (config.num_layers_of(loader::LayerKind::kLinearAttention) > 0) {
    // Gated delta nets: whole key heads per rank, each with its value heads.
    out.linear.num_key_heads = split(config.linear.num_key_heads, "linear_num_key_heads");
    out.linear.num_value_heads = split(config.linear.num_value_heads, "linear_num_value_heads");
  }
  return out;
}

TensorParallelModel::TensorParallelModel(const loader::ModelConfig& config, int32_t size,
                                         const BackendOptions& rank_options, bool expert_parallel)
    : rank_options_(rank_options), whole_(config), expert_parallel_(expert_parallel) {
  auto comms = make_in_process_group(size);
  for (int32_t r = 0; r < size; ++r) {
    Rank rank;
    rank.comm = std::move(comms[r]);
    rank.model = create_model(rank_config(config, r, size, expert_parallel));
    auto* decoder = dynamic_cast<DecoderModel*>(rank.model.get());
    RS_CHECK(decoder != nullptr, "{} cannot be split over ranks", config.architecture);
    decoder->set_communicator(rank.comm.get(), expert_parallel);
    ranks_.push_back(std::move(rank));
  }
}

TensorParallelModel::~TensorParallelModel() = default;

void TensorParallelModel::set_rank_memory(int32_t rank, StepMemory memory) {
  RS_CHECK(rank >= 1 && rank < size(), "rank {} of {} has no memory of its own", rank, size());
  ranks_[rank].memory = std::make_unique<StepMemory>(memory);
}

void TensorParallelModel::load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) {
  RS_CHECK(backend.device().is_cpu(),
           "tensor parallelism runs on CPU backends for now (CUDA needs a multi-GPU build): got {}", backend.name());
  for (int32_t r = 0; r < size(); ++r) {
    Rank& rank = ranks_[r];
    if (r > 0) rank.backend = make_backend("cpu", rank_options_);
    const bool in_major = whole_.quantization.method == loader::QuantMethod::kAwq ||
                          whole_.quantization.method == loader::QuantMethod::kGptq;
    rank.weights = std::make_unique<loader::WeightSource>(
        weights.sharded({r, size(), whole_.num_kv_heads, whole_.linear.key_dim(), whole_.linear.value_dim(), in_major,
                         whole_.architecture == "GptOssForCausalLM", expert_parallel_}));
    const auto rank_progress = [&, r](const std::string& what, double fraction) {
      if (progress) progress(what, (r + fraction) / size());
    };
    rank.model->load(*rank.weights, r == 0 ? backend : *rank.backend, rank_progress);
  }
}

size_t TensorParallelModel::bytes_loaded() const {
  size_t bytes = 0;
  for (const Rank& rank : ranks_)
    if (rank.weights) bytes += rank.weights->bytes_loaded();
  return bytes;
}

void TensorParallelModel::reserve(int64_t max_tokens) {
  for (Rank& rank : ranks_) rank.model->reserve(max_tokens);
}

void TensorParallelModel::forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) {
  for (int32_t r = 1; r < size(); ++r)
    RS_CHECK(ranks_[r].memory != nullptr, "tensor-parallel rank {} has no KV memory (set_rank_memory)", r);
  std::vector<std::exception_ptr> errors(size());
  std::atomic<int32_t> first_failed = -1;  // the rank whose error caused the others' aborts
  const auto run = [&](int32_t r) {
    try {
      Rank& rank = ranks_[r];
      rank.model->forward(inputs, r == 0 ? memory : *rank.memory, r == 0 ? logits : Tensor());
      if (rank.backend) rank.backend->synchronize();
    } catch (...) {
      errors[r] = std::current_exception();
      int32_t none = -1;
      first_failed.compare_exchange_strong(none, r);
      ranks_[r].comm->abort();  // the other ranks' collectives throw instead of waiting for this one
    }
  };
  std::vector<std::thread> threads;
  for (int32_t r = 1; r < size(); ++r) threads.emplace_back(run, r);
  run(0);
  for (auto& t : threads) t.join();
  if (first_failed >= 0) {
    ranks_[0].comm->reset();  // the group's state is shared: one reset readies every rank for the next step
    std::rethrow_exception(errors[first_failed]);
  }
}

}  // namespace rs::model
