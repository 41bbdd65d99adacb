// The engine + scheduler pair of `serve`, `bench throughput` and the Driver (see serving_stack.h).
#include "serving/serving_stack.h"

#include <algorithm>

#include "base/log.h"
#include "spec/dflash_drafter.h"
#include "spec/draft_model_drafter.h"
#include "spec/ngram_drafter.h"

namespace rs::serving {
namespace {

int64_t request_token_limit(const engine::Engine& engine, const memory::KvPoolConfig& pool) {
  int64_t limit = engine.context_length();
  for (const memory::KvGroup& group : pool.groups)
    if (group.window == 0) limit = std::min(limit, group.num_pages * pool.page_size);
  return limit;
}

// The draft model's engine: the target's device and numerics, KV for every running request, a step budget for
// catching up on prompts. On a GPU it is created before the target and keeps its KV pool to a small share of memory
// (the target's pool then takes what its own --mem-fraction-static leaves).
std::unique_ptr<engine::Engine> draft_engine(const spec::SpeculativeConfig& spec, engine::EngineConfig config,
                                             const loader::ModelConfig& target) {
  RS_CHECK(!spec.draft_model_dir.empty(), "--speculative-algorithm {} needs --speculative-draft-model DIR",
           spec::spec_algorithm_name(spec.algorithm));
  const loader::ModelConfig head = loader::load_model_config(spec.draft_model_dir);
  const spec::SpecAlgorithm fits = head.is_eagle3()   ? spec::SpecAlgorithm::kEagle3
                                   : head.is_dflash() ? spec::SpecAlgorithm::kDFlash
                                                      : spec::SpecAlgorithm::kDraft;
  RS_CHECK(fits == spec.algorithm, "--speculative-draft-model {} is {}: use --speculative-algorithm {}",
           spec.draft_model_dir,
           head.is_eagle3()   ? "an EAGLE-3 head (LlamaForCausalLMEagle3)"
           : head.is_dflash() ? "a DFlash drafter (DFlashDraftModel)"
                              : "neither an EAGLE-3 head nor a DFlash drafter",
           spec::spec_algorithm_name(fits));
  // A draft head's steps read the target's features through per-step rows: no recorded graphs. It drafts at the
  // target's positions, however short a context its own config declares.
  if (head.is_draft_head()) {
    config.quantization.clear();  // heads are small: they stay as stored
    config.cuda_graph_max_batch = 0;
    if (config.context_length <= 0) config.context_length = target.max_position_embeddings;
  }
  config.mem_fraction_static = spec.draft_mem_fraction;
  config.kv_cache_gb = 0;
  config.num_state_slots = 0;
  config.extra_state_slots = config.max_running_requests * spec.num_draft_tokens;  // hybrid drafts' checkpoints
  config.progress = nullptr;
  return std::make_unique<engine::Engine>(spec.draft_model_dir, config);
}

// The configured drafter (null without speculation), wrapped in a RejectionInjector when a benchmark asks for one.
std::unique_ptr<spec::Drafter> make_drafter(const spec::SpeculativeConfig& spec, std::unique_ptr<engine::Engine> draft,
                                            engine::Engine& target, int32_t vocab_size) {
  std::unique_ptr<spec::Drafter> drafter;
  if (spec.algorithm == spec::SpecAlgorithm::kNgram)
    drafter = std::make_unique<spec::NgramDrafter>(spec.ngram_min, spec.ngram_max);
  else if (spec.algorithm == spec::SpecAlgorithm::kDraft)
    drafter = std::make_unique<spec::DraftModelDrafter>(std::move(draft));
  else if (spec.algorithm == spec::SpecAlgorithm::kEagle3)
    drafter = std::make_unique<spec::DraftModelDrafter>(std::move(draft), target);
  else if (spec.algorithm == spec::SpecAlgorithm::kDFlash)
    drafter = std::make_unique<spec::DFlashDrafter>(std::move(draft), target);
  if (drafter && spec.inject_reject_rate > 0)
    drafter = std::make_unique<spec::RejectionInjector>(std::move(drafter), spec.inject_reject_rate, vocab_size);
  return drafter;
}

}  // namespace

void resolve_draft_tokens(spec::SpeculativeConfig& spec) {
  if (spec.algorithm != spec::SpecAlgorithm::kDFlash) return;
  RS_CHECK(!spec.draft_model_dir.empty(), "--speculative-algorithm dflash needs --speculative-draft-model DIR");
  const loader::ModelConfig head = loader::load_model_config(spec.draft_model_dir);
  RS_CHECK(head.is_dflash(), "--speculative-draft-model {} is not a DFlash drafter (DFlashDraftModel)",
           spec.draft_model_dir);
  const int32_t drafts = head.dflash.block_size - 1;
  RS_CHECK(!spec.num_draft_tokens_given || spec.num_draft_tokens == drafts,
           "--speculative-num-draft-tokens {} does not match the DFlash drafter's block of {} tokens: it drafts {} "
           "(leave the flag out or give {})",
           spec.num_draft_tokens, head.dflash.block_size, drafts, drafts);
  spec.num_draft_tokens = drafts;
}

ServingStack::ServingStack(const std::string& model_dir, engine::EngineConfig engine_config,
                           sched::SchedulerConfig scheduler_config, StackOptions options) {
  engine_config.max_running_requests = scheduler_config.max_running_requests;
  engine_config.max_step_tokens = scheduler_config.max_prefill_tokens + scheduler_config.max_running_requests;
  resolve_draft_tokens(scheduler_config.speculative);
  const spec::SpeculativeConfig& spec = scheduler_config.speculative;
  std::unique_ptr<engine::Engine> draft;
  if (spec.uses_draft_model()) {
    const loader::ModelConfig target = loader::load_model_config(model_dir);
    draft = draft_engine(spec, engine_config, target);
    // A draft head reads the target's residual stream at some of its layers: the target captures them.
    if (draft->model_config().is_draft_head())
      engine_config.capture_hidden_layers = draft->model_config().draft_capture_layers(target.num_layers);
  }
  // Verify passes carry up to num_draft_tokens more tokens for each of up to max_batch decoding sequences (and on
  // hybrid models keep a recurrent-state checkpoint for each of them).
  if (spec.enabled()) {
    const int32_t drafts = std::min(spec.max_batch, scheduler_config.max_running_requests) * spec.num_draft_tokens;
    engine_config.max_step_tokens += drafts;
    engine_config.extra_state_slots = drafts;
  }
  engine_ = std::make_unique<engine::Engine>(model_dir, engine_config);
  if (draft)
    RS_CHECK(draft->model_config().vocab_size == engine_->model_config().vocab_size,
             "the draft model's vocabulary ({} tokens) differs from the target's ({}): it must share the tokenizer",
             draft->model_config().vocab_size, engine_->model_config().vocab_size);
  if (spec.enabled())
    RS_LOG_INFO("speculative decoding: {} drafts of up to {} tokens while at most {} sequences decode",
                spec::spec_algorithm_name(spec.algorithm), spec.num_draft_tokens, spec.max_batch);
  const memory::KvPoolConfig& pool = engine_->kv_pool().config();
  max_request_tokens_ = request_token_limit(*engine_, pool);
  scheduler_config.context_length = max_request_tokens_;
  scheduler_config.num_state_slots = engine_->state_pool().num_slots();
  scheduler_config.vocab_size = static_cast<int32_t>(engine_->model_config().vocab_size);
  scheduler_config.embedding = engine_->model_config().embedding;
  scheduler_config.feature_group = engine_->feature_group();
  observe_ = std::move(options.step_observer);  // the engine keeps every step's logits for it
  sched::StepFunctions steps{
      .launch = [this](const engine::ForwardBatch& batch) { launched_ = engine_->launch(batch, observe_ != nullptr); },
      .sample =
          [this] {
            engine::StepOutput output = engine_->sample(launched_);
            if (observe_) observe_(*launched_.batch, output);
            return output;
          }};
  scheduler_ =
      std::make_unique<sched::Scheduler>(scheduler_config, pool, std::move(steps),
                                         make_drafter(spec, std::move(draft), *engine_, scheduler_config.vocab_size));
  if (options.scheduler_thread) thread_ = std::thread([scheduler = scheduler_.get()] { scheduler->run(); });
}

ServingStack::~ServingStack() { stop(); }

void ServingStack::stop() {
  if (!thread_.joinable()) return;
  scheduler_->stop();
  thread_.join();
}

bool ServingStack::step() {
  RS_CHECK(!thread_.joinable(), "ServingStack::step: the scheduler runs on its own thread");
  return scheduler_->step();
}

}  // namespace rs::serving
