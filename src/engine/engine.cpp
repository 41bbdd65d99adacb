#include "engine/engine.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "base/log.h"
#include "engine/sampler.h"
#include "model/model.h"

namespace rs::engine {
namespace {

// MemAvailable from /proc/meminfo in bytes (0 if unknown).
size_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

// K/V are stored as the weights are (a bf16 model keeps bf16 K/V, as transformers and vLLM's "auto" do), except in
// exact-f32 mode, whose point is reference numerics.
DType kv_cache_dtype(const EngineConfig& config, const loader::ModelConfig& model) {
  switch (config.kv_cache_dtype) {
    case KvCacheDtype::kF32: return DType::kF32;
    case KvCacheDtype::kBf16: return DType::kBF16;
    case KvCacheDtype::kAuto: break;
  }
  return !config.exact_f32 && model.dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

}  // namespace

Engine::Engine(const std::filesystem::path& model_dir, const EngineConfig& config) : config_(config) {
  model_config_ = loader::load_model_config(model_dir);
  model_ = model::create_model(model_config_);  // fails early, listing supported architectures
  backend_ = make_backend(config_.backend, BackendOptions{config_.num_threads, config_.exact_f32});
  RS_CHECK(config_.load_format == "dummy" || config_.load_format == "auto" || config_.load_format == "safetensors",
           "unknown load format '{}' (auto, safetensors, dummy)", config_.load_format);
  weights_ = std::make_unique<loader::WeightSource>(
      config_.load_format == "dummy" ? loader::WeightSource::dummy(config_.dummy_seed, model_config_.dtype)
                                     : loader::WeightSource::checkpoint(model_dir));
  model_->load(*weights_, *backend_, config_.progress);
  RS_LOG_INFO("loaded {} ({} MiB of weights) on {}", model_config_.architecture, weights_->bytes_loaded() >> 20,
              backend_->name());

  context_length_ = config_.context_length > 0 ? config_.context_length : model_config_.max_position_embeddings;
  context_length_ = std::min(context_length_, model_config_.max_position_embeddings);
  kv::KvPoolConfig kv_config;
  kv_config.page_size = config_.page_size;
  kv_config.num_kv_heads = model_config_.num_kv_heads;
  kv_config.head_dim = model_config_.head_dim;
  kv_config.dtype = kv_cache_dtype(config_, model_config_);
  kv_config.groups = kv::group_layers_by_window(model_config_.layer_windows);
  size_t budget = static_cast<size_t>(config_.kv_cache_gb * (1ull << 30));
  if (budget == 0) {
    // Enough for every running request at full context, but at most a fifth of available host memory.
    size_t per_token = 0;
    for (const auto& group : kv_config.groups) per_token += kv::page_bytes(kv_config, group) / kv_config.page_size;
    const size_t wanted = per_token * context_length_ * std::max(1, config_.max_running_requests);
    const size_t available = host_available_bytes();
    budget = available ? std::min(wanted, available / 5) : wanted;
  }
  kv::plan_kv_pool(kv_config, budget, config_.max_running_requests, config_.max_step_tokens);
  kv_pool_ = std::make_unique<kv::KvPool>(*backend_, kv_config);
  RS_LOG_INFO("KV pool: {} MiB of {}, page size {}, {} group(s)", kv_pool_->total_bytes() >> 20,
              dtype_name(kv_config.dtype), kv_config.page_size, kv_config.groups.size());
}

Engine::~Engine() = default;

StepOutput Engine::forward(const ForwardBatch& batch, bool keep_logits) {
  const int32_t tokens = batch.num_tokens(), seqs = batch.num_seqs();
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size());
  const int32_t page_size = kv_pool_->page_size();
  RS_CHECK(tokens > 0 && seqs > 0 && static_cast<int32_t>(batch.seq_token_start.size()) == seqs + 1,
           "malformed batch: {} tokens, {} sequences", tokens, seqs);
  RS_CHECK(static_cast<int>(batch.page_tables.size()) == kv_pool_->num_groups(),
           "batch has {} page tables for {} KV groups", batch.page_tables.size(), kv_pool_->num_groups());
  RS_CHECK(batch.sampling.empty() || batch.sampling.size() == batch.logit_rows.size(),
           "batch has {} sampling rows for {} logit rows", batch.sampling.size(), batch.logit_rows.size());

  // Host-side metadata; the CPU backend reads it in place.
  std::vector<int32_t> token_seq(tokens);
  int32_t max_kv_len = 0;
  for (int32_t s = 0; s < seqs; ++s) {
    for (int32_t t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t) token_seq[t] = s;
    max_kv_len = std::max(max_kv_len, batch.seq_kv_len[s]);
  }
  RS_CHECK(max_kv_len <= context_length_, "sequence of {} tokens exceeds the context length {}", max_kv_len,
           context_length_);
  std::vector<std::vector<int32_t>> slots(kv_pool_->num_groups(), std::vector<int32_t>(tokens));
  for (int g = 0; g < kv_pool_->num_groups(); ++g) {
    const auto& table = batch.page_tables[g];
    RS_CHECK(static_cast<int64_t>(table.size()) == static_cast<int64_t>(seqs) * batch.max_pages,
             "page table {} has {} entries for {} x {}", g, table.size(), seqs, batch.max_pages);
    // Every page a token of this step may read must be present: attention does not check in release builds.
    const int32_t window = kv_pool_->group(g).window;
    for (int32_t s = 0; s < seqs; ++s) {
      const int32_t first_read = window > 0 ? std::max(0, batch.positions[batch.seq_token_start[s]] - window + 1) : 0;
      RS_CHECK((batch.seq_kv_len[s] + page_size - 1) / page_size <= batch.max_pages,
               "sequence {} of {} tokens does not fit a page table of {} pages", s, batch.seq_kv_len[s],
               batch.max_pages);
      for (int32_t p = first_read / page_size; p * page_size < batch.seq_kv_len[s]; ++p) {
        const int32_t page = table[s * batch.max_pages + p];
        RS_CHECK(page >= 0 && page < kv_pool_->group(g).num_pages,
                 "sequence {} reads KV page {} of group {} (positions from {}), which is absent", s, p, g, first_read);
      }
    }
    for (int32_t t = 0; t < tokens; ++t) {
      const int32_t pos = batch.positions[t], page_index = pos / page_size;
      RS_CHECK(page_index < batch.max_pages, "position {} beyond the page table", pos);
      const int32_t page = table[token_seq[t] * batch.max_pages + page_index];
      RS_CHECK(page >= 0 && page < kv_pool_->group(g).num_pages, "token at position {} has no KV page in group {}", pos,
               g);
      slots[g][t] = page * page_size + pos % page_size;
    }
  }
  // The CPU backend reads host memory directly; other devices get a copy (see Backend::copy).
  std::vector<Buffer> staging;
  auto device_view = [&](const std::vector<int32_t>& host, std::initializer_list<int64_t> shape) {
    Tensor view(const_cast<int32_t*>(host.data()), DType::kI32, shape);
    if (backend_->device().is_cpu()) return view;
    staging.push_back(backend_->alloc(view.bytes()));
    Tensor device(staging.back().data(), DType::kI32, shape, backend_->device());
    backend_->copy(device, view);
    return device;
  };
  model::StepInputs inputs;
  inputs.token_ids = device_view(batch.token_ids, {tokens});
  inputs.logit_rows = device_view(batch.logit_rows, {rows});
  const Tensor positions = device_view(batch.positions, {tokens});
  const Tensor token_seq_t = device_view(token_seq, {tokens});
  const Tensor kv_len = device_view(batch.seq_kv_len, {seqs});
  for (int g = 0; g < kv_pool_->num_groups(); ++g) {
    inputs.groups.push_back(BatchView{positions, token_seq_t, kv_len,
                                      device_view(batch.page_tables[g], {seqs, batch.max_pages}),
                                      device_view(slots[g], {tokens}), page_size, seqs, max_kv_len});
  }
  const int64_t vocab = model_config_.vocab_size;
  Buffer logits_device = backend_->alloc(static_cast<size_t>(rows) * vocab * sizeof(float));
  Tensor logits(logits_device.data(), DType::kF32, {rows, vocab}, backend_->device());
  model_->forward(inputs, *kv_pool_, logits);

  StepOutput output;
  std::vector<float> host_logits(static_cast<size_t>(rows) * vocab);
  backend_->copy(Tensor(host_logits.data(), DType::kF32, {rows, vocab}), logits);
  backend_->synchronize();
  for (int32_t r = 0; r < static_cast<int32_t>(batch.sampling.size()); ++r) {
    std::vector<float> row(host_logits.begin() + r * vocab, host_logits.begin() + (r + 1) * vocab);
    output.tokens.push_back(sample_token(row, batch.sampling[r]));
  }
  if (keep_logits) output.logits = std::move(host_logits);
  return output;
}

}  // namespace rs::engine
