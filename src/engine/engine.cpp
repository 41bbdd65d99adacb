#include "engine/engine.h"

#include <algorithm>
#include <string>

#include <fmt/ranges.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "engine/pooling.h"
#include "engine/sampler.h"
#include "engine/step_staging.h"
#include "engine/weight_plan.h"
#include "loader/dummy_layout.h"
#include "memory/kv_footprint.h"
#include "model/model.h"
#include "model/tensor_parallel.h"

namespace rs::engine {
namespace {

// Batch sizes that recur in decode, as SGLang records them: 1, 2, 4, 8, then steps of 8 to 64, of 16 to 256, of 32
// beyond; capped at max_batch (which is always included).
std::vector<int32_t> decode_graph_sizes(int32_t max_batch) {
  std::vector<int32_t> sizes;
  for (int32_t b = 1; b < max_batch;) {
    sizes.push_back(b);
    b = b < 8 ? 2 * b : b < 64 ? b + 8 : b < 256 ? b + 16 : b + 32;
  }
  if (max_batch > 0) sizes.push_back(max_batch);
  return sizes;
}

// Layer windows for the KV pool: gated-delta-net layers keep no K/V.
std::vector<int32_t> kv_layer_windows(const loader::ModelConfig& config) {
  std::vector<int32_t> windows = config.layer_windows;
  for (size_t layer = 0; layer < windows.size(); ++layer)
    if (config.layer_kinds[layer] == loader::LayerKind::kLinearAttention) windows[layer] = memory::kNoKvLayer;
  return windows;
}

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;
constexpr int64_t kReportContext = 32768;  // the context the start-up log prices one request at

}  // namespace

memory::StateGeometry state_geometry_of(const loader::ModelConfig& config) {
  memory::StateGeometry geometry;
  for (int32_t layer = 0; layer < config.num_layers; ++layer)
    if (config.layer_kinds[layer] == loader::LayerKind::kLinearAttention) geometry.layers.push_back(layer);
  if (geometry.empty()) return geometry;
  geometry.conv_channels = config.linear.conv_channels();
  geometry.conv_kernel = config.linear.conv_kernel;
  geometry.num_v_heads = config.linear.num_value_heads;
  geometry.k_head_dim = config.linear.key_head_dim;
  geometry.v_head_dim = config.linear.value_head_dim;
  return geometry;
}

void Engine::apply_kv_cache_scales() {
  const std::vector<model::Model::KvScales> scales = model_->kv_cache_scales();
  int32_t given = 0;
  for (size_t layer = 0; layer < scales.size(); ++layer) {
    if (scales[layer].k <= 0) continue;  // a layer without scales, or one without K/V
    kv_pool_->set_scales(static_cast<int>(layer), scales[layer].k, scales[layer].v);
    ++given;
  }
  const int32_t layers = model_config_.num_layers_of(loader::LayerKind::kAttention);
  if (given == 0) {
    RS_LOG_INFO(
        "fp8 KV cache: the checkpoint has no k_scale/v_scale, so every layer stores K and V at scale 1 "
        "(values beyond +-448 saturate)");
  } else {
    RS_LOG_INFO("fp8 KV cache: the checkpoint's k_scale/v_scale for {} of {} attention layers{}", given, layers,
                given < layers ? " (the rest at scale 1)" : "");
  }
}

DType kv_cache_dtype(const EngineConfig& config, const loader::ModelConfig& model) {
  switch (config.kv_cache_dtype) {
    case KvCacheDtype::kF32: return DType::kF32;
    case KvCacheDtype::kBf16: return DType::kBF16;
    case KvCacheDtype::kFp8E4M3: return DType::kF8E4M3;
    case KvCacheDtype::kAuto: break;
  }
  return !config.exact_f32 && model.dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

Engine::Engine(const std::filesystem::path& model_dir, const EngineConfig& config) : config_(config) {
  model_config_ = loader::load_model_config(model_dir);
  RS_CHECK(config_.task == "auto" || config_.task == "generate" || config_.task == "embed",
           "unknown task '{}' (auto, generate, embed)", config_.task);
  model_config_.embedding = config_.task == "embed" || (config_.task == "auto" && model_config_.embedding_detected);
  if (model_config_.embedding) {
    RS_CHECK(!model_config_.is_draft_head(), "a draft head (EAGLE-3, DFlash) cannot serve embeddings");
    RS_CHECK(model_config_.embedding_pooling == "last",
             "{}: pooling '{}' is not supported: radixserve pools the last token (as Qwen3-Embedding does)",
             model_dir.string(), model_config_.embedding_pooling);
    RS_CHECK(config_.capture_hidden_layers.empty(), "an embedding model cannot be a speculative-decoding target");
    config_.cuda_graph_max_batch = 0;  // steps are prefills: nothing decodes
  }
  // A draft head follows its target's positions: trained heads often declare a short max_position_embeddings.
  if (model_config_.is_draft_head() && config_.context_length > model_config_.max_position_embeddings)
    model_config_.max_position_embeddings = config_.context_length;
  if (!config_.quantization.empty()) {
    RS_CHECK(!model_config_.is_draft_head(), "--quantization applies to target models, not to draft heads");
    model_config_.quantization = loader::parse_quantization_config(
        model_config_.raw, (model_dir / "config.json").string(), config_.quantization);
  }
  BackendOptions backend_options{config_.num_threads, config_.exact_f32, config_.attention_backend,
                                 config_.programmatic_launch, config_.deterministic};
  const int32_t tp = config_.tensor_parallel_size;
  RS_CHECK(tp >= 1, "--tensor-parallel-size must be at least 1, got {}", tp);
  RS_CHECK(!config_.expert_parallel || tp > 1,
           "--expert-parallel spreads experts over the ranks of "
           "--tensor-parallel-size, which is 1");
  if (tp > 1) {
    RS_CHECK(config_.backend == "cpu",
             "--tensor-parallel-size {} runs on the CPU backend for now (CUDA ranks need a multi-GPU build)", tp);
    RS_CHECK(config_.capture_hidden_layers.empty(),
             "an EAGLE-3 target cannot be split over ranks yet: use --tensor-parallel-size 1");
    RS_CHECK(config_.kv_cache_dtype != KvCacheDtype::kFp8E4M3,
             "an fp8 KV cache with --tensor-parallel-size is not supported yet");
    // The ranks share the cores: each gets its part of them.
    backend_options.num_threads =
        std::max(1, (config_.num_threads > 0 ? config_.num_threads : hardware_threads()) / tp);
    model_ = std::make_unique<model::TensorParallelModel>(model_config_, tp, backend_options, config_.expert_parallel);
  } else {
    model_ = model::create_model(model_config_);  // fails early, listing supported architectures
  }
  backend_ = make_backend(config_.backend, backend_options);
  RS_CHECK(config_.load_format == "dummy" || config_.load_format == "auto" || config_.load_format == "safetensors",
           "unknown load format '{}' (auto, safetensors, dummy)", config_.load_format);
  check_weights_fit(model_dir);
  weights_ = std::make_unique<loader::WeightSource>(
      config_.load_format == "dummy"
          ? loader::WeightSource::dummy(config_.dummy_seed, model_config_.dtype, loader::dummy_layout(model_config_))
          : loader::WeightSource::checkpoint(model_dir));
  model_->load(*weights_, *backend_, config_.progress);
  // A device model reads its uploaded copies: host buffers made while loading (GGUF blocks) go.
  if (!backend_->device().is_cpu()) weights_->release_converted();
  RS_LOG_INFO("loaded {} ({} MiB of weights) on {}{}", model_config_.architecture, weight_bytes() >> 20,
              backend_->name(), tp > 1 ? fmt::format(", split over {} ranks", tp) : "");

  context_length_ = config_.context_length > 0 ? config_.context_length : model_config_.max_position_embeddings;
  context_length_ = std::min(context_length_, model_config_.max_position_embeddings);
  // Activations and logits for the largest step are allocated before the KV pool takes what memory is left.
  reserved_tokens_ = std::max<int64_t>({config_.max_step_tokens, config_.max_running_requests, 1});
  model_->reserve(reserved_tokens_);
  reserve_logits(std::max(config_.max_running_requests, 1));
  memory::KvPoolConfig kv_config;
  kv_config.page_size = config_.page_size;
  kv_config.num_kv_heads = std::max(model_config_.num_kv_heads / tp, 1);  // each rank's share (or its one head)
  kv_config.head_dim = model_config_.head_dim;
  kv_config.dtype = kv_cache_dtype(config_, model_config_);
  kv_config.groups = memory::group_layers_by_window(kv_layer_windows(model_config_));
  // An EAGLE-3 target's feature cache: an f32 row per slot of the full-attention group, within the same budget.
  kv_config.extra_bytes_per_full_slot =
      config_.capture_hidden_layers.size() * static_cast<size_t>(model_config_.hidden_size) * sizeof(float);
  // Each rank holds the state of its own gated-delta-net heads.
  const memory::StateGeometry state_geometry =
      state_geometry_of(tp > 1 ? model::rank_config(model_config_, 0, tp, config_.expert_parallel) : model_config_);
  // On a device, scratch reaches its final size before the KV pool takes what is left (memory_profile.cpp). A host's
  // budget is a fifth of free RAM, and a largest step on the CPU would cost minutes of start-up for a large model.
  if (!backend_->device().is_cpu() && !model_config_.is_draft_head()) profile_memory(kv_config, state_geometry);
  size_t budget = kv_budget_bytes(kv_config, state_geometry) / tp;  // every rank holds a pool of this geometry
  create_state_pool(state_geometry, budget);
  memory::plan_kv_pool(kv_config, budget, config_.max_running_requests, config_.max_step_tokens);
  kv_pool_ = std::make_unique<memory::KvPool>(*backend_, kv_config);
  if (kv_config.dtype == DType::kF8E4M3) apply_kv_cache_scales();
  if (auto* split = dynamic_cast<model::TensorParallelModel*>(model_.get()))
    for (int32_t rank = 1; rank < tp; ++rank) {
      Backend& rank_backend = split->rank_backend(rank);
      rank_kv_pools_.push_back(std::make_unique<memory::KvPool>(rank_backend, kv_config));
      rank_state_pools_.push_back(
          std::make_unique<memory::StatePool>(rank_backend, state_geometry, state_pool_->num_slots()));
      split->set_rank_memory(
          rank, model::StepMemory{*rank_kv_pools_.back(),
                                  state_pool_->num_slots() > 0 ? rank_state_pools_.back().get() : nullptr});
    }
  memory_ = std::make_unique<model::StepMemory>(
      model::StepMemory{*kv_pool_, state_pool_->num_slots() > 0 ? state_pool_.get() : nullptr});
  RS_LOG_INFO("KV pool{}: {} MiB of {}, page size {}, {} group(s) over {} attention layer(s)",
              tp > 1 ? fmt::format(" (each of {} ranks)", tp) : "", kv_pool_->total_bytes() >> 20,
              dtype_name(kv_config.dtype), kv_config.page_size, kv_config.groups.size(),
              model_config_.num_layers_of(loader::LayerKind::kAttention));
  RS_LOG_INFO("memory per request at {} tokens: {:.1f} MiB of KV + {:.1f} MiB of recurrent state", kReportContext,
              memory::request_kv_footprint(kv_config, kReportContext).windowed_bytes / kMiB,
              memory::slot_bytes(state_geometry) / kMiB);
  if (!config_.capture_hidden_layers.empty()) allocate_feature_cache();
  staging_ = std::make_unique<StepStaging>(*backend_, *kv_pool_, context_length_);
  staging_->set_hidden_taps(taps_.get());
  // Sized for the largest step up front, so that the first long prefill does not move it (and the graphs with it).
  const int32_t max_seqs = std::max(config_.max_running_requests, 1);
  staging_->reserve(static_cast<int32_t>(reserved_tokens_), max_seqs, max_seqs);

  const int32_t graph_max =
      config_.cuda_graph_max_batch < 0 ? std::max(config_.max_running_requests, 1) : config_.cuda_graph_max_batch;
  if (backend_->supports_graphs())
    graph_sizes_ = decode_graph_sizes(std::min<int32_t>(graph_max, static_cast<int32_t>(reserved_tokens_)));
  if (!graph_sizes_.empty()) {
    run_largest_step();
    capture_decode_graphs();
  }
}

void Engine::run_largest_step() {
  // One sequence of reserved_tokens_ tokens, all at position 0 (each reads one key), writing page 0 of every group,
  // which no request holds yet. Internal scratch (bf16 GEMM inputs, MoE buffers) grows to the largest step's size
  // here, once, instead of moving under recorded graphs at the first long prefill.
  const int32_t tokens = static_cast<int32_t>(reserved_tokens_);
  ForwardBatch batch;
  batch.token_ids.assign(tokens, 0);
  batch.positions.assign(tokens, 0);
  batch.seq_token_start = {0, tokens};
  batch.seq_kv_len = {1};
  batch.page_tables.assign(kv_pool_->num_groups(), {0});
  batch.max_pages = 1;
  batch.logit_rows = {tokens - 1};
  const model::StepInputs inputs = staging_->upload(batch, 0, 0);
  model_->forward(inputs, *memory_,
                  Tensor(logits_.data(), DType::kF32, {1, model_config_.logits_width()}, backend_->device()));
  backend_->synchronize();
}

Engine::~Engine() = default;

size_t Engine::weight_bytes() const {
  if (const auto* split = dynamic_cast<const model::TensorParallelModel*>(model_.get())) return split->bytes_loaded();
  return weights_->bytes_loaded();
}

void Engine::check_weights_fit(const std::filesystem::path& model_dir) const {
  // A CPU maps a checkpoint's files (the page cache may drop them): only generated (dummy) weights must fit in RAM.
  const bool dummy = config_.load_format == "dummy";
  const bool device = !backend_->device().is_cpu();
  if (!device && !dummy) return;
  const size_t need = planned_weight_bytes(model_dir, model_config_, dummy);
  const size_t free = backend_->memory_info().free_bytes;
  RS_CHECK(free == 0 || need <= free,
           "{}: its weights need at least {:.1f} GiB ({}), but {} has {:.1f} GiB free: use a quantized checkpoint "
           "(FP8, 4-bit) or a smaller model",
           model_dir.string(), need / kGiB,
           dummy
               ? fmt::format("{:.2f}B parameters at their stored width", count_parameters(model_config_).total() / 1e9)
               : "the checkpoint's tensor files",
           device ? backend_->name() : "this machine's memory", free / kGiB);
}

void Engine::allocate_feature_cache() {
  // The first full-attention group: its pages hold every position of a sequence (windows free theirs).
  const auto& groups = kv_pool_->config().groups;
  for (size_t g = 0; g < groups.size() && feature_group_ < 0; ++g)
    if (groups[g].window == 0) feature_group_ = static_cast<int32_t>(g);
  RS_CHECK(feature_group_ >= 0, "a draft head's target (EAGLE-3, DFlash) needs a full-attention layer");
  const int64_t rows = groups[feature_group_].num_pages * kv_pool_->page_size();
  const int64_t width = static_cast<int64_t>(config_.capture_hidden_layers.size()) * model_config_.hidden_size;
  features_buffer_ = backend_->alloc(static_cast<size_t>(rows * width) * sizeof(float));
  features_ = Tensor(features_buffer_.data(), DType::kF32, {rows, width}, backend_->device());
  for (int32_t layer : config_.capture_hidden_layers)
    RS_CHECK(layer >= 0 && layer <= model_config_.num_layers, "cannot capture layer {} of {}", layer,
             model_config_.num_layers);
  RS_CHECK(config_.tensor_parallel_size == 1, "an EAGLE-3 target cannot be split over ranks yet");
  taps_ = std::make_unique<model::HiddenTaps>(
      model::HiddenTaps{.layers = config_.capture_hidden_layers, .cache = features_, .group = feature_group_});
  RS_LOG_INFO("draft-head features: layers {} into {} MiB ({} f32 per KV slot)",
              fmt::join(config_.capture_hidden_layers, ","), features_buffer_.bytes() >> 20, width);
}

void Engine::create_state_pool(const memory::StateGeometry& geometry, size_t& budget) {
  if (geometry.empty()) {
    state_pool_ = std::make_unique<memory::StatePool>(*backend_, geometry, 0);
    return;
  }
  const size_t per_slot = memory::slot_bytes(geometry);
  const int32_t slots =
      config_.num_state_slots > 0
          ? config_.num_state_slots
          // one per running request, as many again for prefix-cache snapshots, and speculative checkpoints
          : memory::plan_state_slots(geometry, budget / 2,
                                     2 * std::max(1, config_.max_running_requests) + config_.extra_state_slots);
  RS_CHECK(slots > 0, "the memory budget of {:.1f} MiB cannot hold one recurrent-state slot of {:.1f} MiB",
           budget / kMiB, per_slot / kMiB);
  RS_CHECK(slots * per_slot < budget,
           "{} recurrent-state slots of {:.1f} MiB leave nothing of the {:.1f} MiB memory budget for KV pages "
           "(lower --num-state-slots or raise --kv-cache-gb)",
           slots, per_slot / kMiB, budget / kMiB);
  budget -= slots * per_slot;
  state_pool_ = std::make_unique<memory::StatePool>(*backend_, geometry, slots);
  RS_LOG_INFO("state pool: {} slots x {:.1f} MiB ({} gated-delta-net layers, conv + recurrent state) = {:.1f} MiB",
              slots, per_slot / kMiB, geometry.layers.size(), state_pool_->total_bytes() / kMiB);
}

size_t Engine::kv_budget_bytes(const memory::KvPoolConfig& kv_config, const memory::StateGeometry& state) const {
  if (config_.kv_cache_gb > 0) return static_cast<size_t>(config_.kv_cache_gb * (1ull << 30));
  // Enough for every running request at full context (and its state slot), capped by memory: on the host a fifth
  // of what is available; on a device what remains of mem_fraction_static of its memory.
  size_t per_token = 0;
  for (const auto& group : kv_config.groups)
    per_token += memory::page_bytes(kv_config, group) / kv_config.page_size +
                 (group.window == 0 ? kv_config.extra_bytes_per_full_slot : 0);
  const size_t wanted =
      (per_token * context_length_ + memory::slot_bytes(state)) * std::max(1, config_.max_running_requests);
  const MemoryInfo memory = backend_->memory_info();
  if (memory.total_bytes == 0) return wanted;
  if (backend_->device().is_cpu()) return std::min(wanted, memory.free_bytes / 5);
  const double keep_free = (1.0 - std::clamp(config_.mem_fraction_static, 0.05, 0.99)) * memory.total_bytes;
  const size_t available = memory.free_bytes > keep_free ? static_cast<size_t>(memory.free_bytes - keep_free) : 0;
  RS_CHECK(available > 0, "no device memory left for the KV cache: {} MiB free of {} MiB with --mem-fraction-static {}",
           memory.free_bytes >> 20, memory.total_bytes >> 20, config_.mem_fraction_static);
  return std::min(wanted, available);
}

bool Engine::reserve_logits(int32_t rows) {
  if (rows <= logits_rows_) return false;
  backend_->synchronize();  // recorded or queued work may still write the old buffer
  logits_ = backend_->alloc(static_cast<size_t>(rows) * model_config_.logits_width() * sizeof(float));
  logits_rows_ = rows;
  ++logits_epoch_;
  return true;
}

uint64_t Engine::memory_epoch() const {
  // Each source changes rarely and only grows; a sum of strictly increasing counters changes when any of them does.
  return backend_->memory_epoch() + staging_->epoch() + logits_epoch_ + static_cast<uint64_t>(reserved_tokens_);
}

void Engine::capture_decode_graphs() {
  const auto start = Clock::now();
  const size_t free_before = backend_->memory_info().free_bytes;
  const int32_t vocab = static_cast<int32_t>(model_config_.logits_width());
  ForwardBatch idle;  // no real sequence: every row is an idle padding row
  idle.seq_token_start = {0};
  idle.page_tables.assign(kv_pool_->num_groups(), {});
  const auto logits_for = [&](int32_t rows) {
    return Tensor(logits_.data(), DType::kF32, {rows, vocab}, backend_->device());
  };
  // Every decode size runs eagerly first, so scratch reaches its final size before anything is recorded and no
  // recording is invalidated by a later one. (A later, larger prefill can still grow scratch: forward() then records
  // the graphs again.)
  for (int pass = 0; pass < 2; ++pass) {
    for (auto it = graph_sizes_.rbegin(); it != graph_sizes_.rend(); ++it) {
      const int32_t size = *it;
      const model::StepInputs inputs = staging_->upload(idle, size, static_cast<int32_t>(context_length_));
      if (pass == 0) {
        model_->forward(inputs, *memory_, logits_for(size));
        backend_->synchronize();
        continue;
      }
      graphs_[size] = backend_->capture([&] { model_->forward(inputs, *memory_, logits_for(size)); });
      backend_->synchronize();
    }
  }
  graphs_epoch_ = memory_epoch();
  const size_t free_after = backend_->memory_info().free_bytes;
  RS_LOG_INFO("recorded {} decode graphs (batch 1..{}) in {:.2f} s, {} MiB", graphs_.size(), graph_sizes_.back(),
              seconds_since(start), free_before > free_after ? (free_before - free_after) >> 20 : 0);
}

int32_t Engine::graph_size_for(const ForwardBatch& batch) const {
  const int32_t seqs = batch.num_seqs();
  if (graph_sizes_.empty() || seqs > graph_sizes_.back() || batch.num_tokens() != seqs ||
      static_cast<int32_t>(batch.logit_rows.size()) != seqs)
    return 0;
  return *std::lower_bound(graph_sizes_.begin(), graph_sizes_.end(), seqs);
}

StepHandle Engine::launch(const ForwardBatch& batch, bool keep_logits) {
  if (launched_ != nullptr) {  // never sampled (its caller failed in between): its staging is still being read
    backend_->synchronize();
    launched_ = nullptr;
  }
  const int32_t tokens = batch.num_tokens(), seqs = batch.num_seqs();
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size());
  RS_CHECK(tokens > 0 && seqs > 0, "malformed batch: {} tokens, {} sequences", tokens, seqs);
  RS_CHECK(state_pool_->num_slots() == 0 || static_cast<int32_t>(batch.state_slots.size()) == seqs,
           "the model keeps recurrent state: a step needs a state slot for each of its {} sequences, not {}", seqs,
           batch.state_slots.size());
  RS_CHECK(batch.sampling.empty() || batch.sampling.size() == batch.logit_rows.size(),
           "batch has {} sampling rows for {} logit rows", batch.sampling.size(), batch.logit_rows.size());
  const int64_t vocab = model_config_.logits_width();

  const int32_t graph_size = graph_size_for(batch);
  staging_->reserve(batch, graph_size);
  if (tokens > reserved_tokens_) {
    model_->reserve(tokens);
    reserved_tokens_ = tokens;
  }
  reserve_logits(std::max(rows, graph_size));
  if (graph_size > 0 && memory_epoch() != graphs_epoch_) {
    RS_LOG_INFO("activation memory moved: recording the decode graphs again");
    graphs_.clear();
    capture_decode_graphs();
  }
  auto* split = rank_state_pools_.empty() ? nullptr : dynamic_cast<model::TensorParallelModel*>(model_.get());
  for (const auto& [from, to] : batch.state_copies) {
    state_pool_->copy_slot(*backend_, from, to);
    for (size_t rank = 1; rank <= rank_state_pools_.size(); ++rank)  // every rank's state moves alike
      rank_state_pools_[rank - 1]->copy_slot(split->rank_backend(static_cast<int32_t>(rank)), from, to);
  }
  Tensor logits(logits_.data(), DType::kF32, {std::max(rows, graph_size), vocab}, backend_->device());
  // Graphs (and the memory profile) plan attention for the context length, so its split scratch takes its final size.
  const model::StepInputs inputs =
      staging_->upload(batch, graph_size, graph_size > 0 || profiling_ ? context_length_ : 0);
  if (graph_size > 0) {
    graphs_.at(graph_size)->replay();
  } else {
    model_->forward(inputs, *memory_, logits);
  }
  launched_ = &batch;
  return StepHandle{.batch = &batch, .keep_logits = keep_logits};
}

StepOutput Engine::sample(const StepHandle& step) {
  RS_CHECK(step.batch != nullptr && step.batch == launched_, "Engine::sample: not the step launch() returned last");
  launched_ = nullptr;
  const ForwardBatch& batch = *step.batch;
  const bool keep_logits = step.keep_logits;
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size());
  const int64_t vocab = model_config_.logits_width();
  const Tensor logits(logits_.data(), DType::kF32, {rows, vocab}, backend_->device());

  StepOutput output;
  if (model_config_.embedding) {  // the rows are hidden states: pooled, normalised, nothing to sample
    std::vector<float> host(static_cast<size_t>(rows) * vocab);
    backend_->copy(Tensor(host.data(), DType::kF32, {rows, vocab}), logits);
    backend_->synchronize();
    for (int32_t r = 0; r < rows; ++r) {
      auto& row = output.embeddings.emplace_back(host.begin() + r * vocab, host.begin() + (r + 1) * vocab);
      if (model_config_.embedding_normalize) l2_normalize(row);
    }
    return output;
  }
  if (keep_logits) {  // raw logits, before sampling applies penalties in place
    output.logits.resize(static_cast<size_t>(rows) * vocab);
    backend_->copy(Tensor(output.logits.data(), DType::kF32, {rows, vocab}), logits);
  }
  if (batch.sampling.empty()) {
    backend_->synchronize();  // the staging buffers are rewritten by the next step
    return output;
  }
  std::vector<std::vector<PenaltyToken>> penalties(batch.sampling.size());
  std::vector<SampleSpec> specs;
  specs.reserve(batch.sampling.size());
  for (size_t r = 0; r < batch.sampling.size(); ++r) specs.push_back(make_sample_spec(batch.sampling[r], penalties[r]));
  // Scored rows read the raw logits on the host first; their greedy draw below is discarded.
  const std::vector<std::pair<size_t, SampledToken>> scored = score_rows(logits, batch.sampling);
  for (const auto& [r, score] : scored) specs[r] = SampleSpec{};
  adjust_logits(logits, batch.sampling);
  apply_token_bitmasks(logits, batch.sampling);
  output.tokens.resize(specs.size());
  backend_->sample(logits, specs, output.tokens);
  for (const auto& [r, score] : scored) output.tokens[r] = score;
  return output;
}

std::vector<std::pair<size_t, SampledToken>> Engine::score_rows(const Tensor& logits,
                                                                const std::vector<SamplingRow>& rows) {
  std::vector<std::pair<size_t, SampledToken>> scored;
  const int64_t vocab = logits.dim(1);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].score_target < 0) continue;
    RS_CHECK(rows[r].score_target < vocab, "scored token {} is outside the vocabulary of {}", rows[r].score_target,
             vocab);
    score_host_.resize(static_cast<size_t>(vocab));
    backend_->copy(Tensor(score_host_.data(), DType::kF32, {1, vocab}),
                   logits.slice_rows(static_cast<int64_t>(r), static_cast<int64_t>(r) + 1));
    scored.emplace_back(r, score_on_host(score_host_, rows[r].score_target, rows[r].params->prompt_logprobs));
  }
  return scored;
}

void Engine::adjust_logits(Tensor logits, const std::vector<SamplingRow>& rows) {
  const int64_t vocab = logits.dim(1);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!logit_adjustment(rows[r], vocab, adjustment_host_)) continue;
    // A dense row through the backend's own copy and add: rare (only requests that ask for it), and no new kernel.
    if (adjustment_row_.bytes() == 0) adjustment_row_ = backend_->alloc(static_cast<size_t>(vocab) * sizeof(float));
    const Tensor device_row(adjustment_row_.data(), DType::kF32, {1, vocab}, backend_->device());
    backend_->copy(device_row, Tensor(adjustment_host_.data(), DType::kF32, {1, vocab}));
    Tensor row = logits.slice_rows(static_cast<int64_t>(r), static_cast<int64_t>(r) + 1);
    backend_->add(row, device_row, row);
  }
}

void Engine::apply_token_bitmasks(Tensor logits, const std::vector<SamplingRow>& rows) {
  if (std::none_of(rows.begin(), rows.end(), [](const SamplingRow& row) { return !row.token_bitmask.empty(); })) return;
  const int64_t vocab = logits.dim(1), words = (vocab + 31) / 32;
  const int64_t num_rows = static_cast<int64_t>(rows.size());
  // One upload for the whole step; unconstrained rows pass everything.
  bitmask_host_.assign(static_cast<size_t>(num_rows * words), 0xFFFFFFFFu);
  for (int64_t r = 0; r < num_rows; ++r) {
    const auto& mask = rows[r].token_bitmask;
    if (mask.empty()) continue;
    RS_CHECK(static_cast<int64_t>(mask.size()) == words,
             "row {} has a token bitmask of {} words for a vocabulary of {}", r, mask.size(), vocab);
    std::copy(mask.begin(), mask.end(), bitmask_host_.begin() + r * words);
  }
  const size_t bytes = bitmask_host_.size() * sizeof(uint32_t);
  if (bitmask_device_.bytes() < bytes) bitmask_device_ = backend_->alloc(bytes);
  const Tensor device_mask(bitmask_device_.data(), DType::kU32, {num_rows, words}, backend_->device());
  backend_->copy(device_mask, Tensor(bitmask_host_.data(), DType::kU32, {num_rows, words}));
  backend_->apply_token_bitmask(logits, device_mask);
}

}  // namespace rs::engine
