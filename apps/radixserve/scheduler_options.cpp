// The scheduler's and speculative decoding's command-line flags (scheduler_options.h).
#include "apps/radixserve/scheduler_options.h"

#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/model_option.h"

namespace rs::app {

void add_scheduler_options(CLI::App& cmd, sched::SchedulerConfig& config) {
  // Second names are vLLM's spellings of the same settings (drop-in command lines).
  cmd.add_option("--max-running-requests,--max-num-seqs", config.max_running_requests, "Sequences in the running batch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd.add_option("--max-prefill-tokens,--max-num-batched-tokens", config.max_prefill_tokens, "Prefill tokens per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--chunked-prefill-size", config.chunked_prefill_size, "Prefill tokens of one request per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--max-queued-requests", config.max_queued_requests,
                 "Requests waiting for admission before new ones get 503")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd.add_flag_callback(
      "--disable-radix-cache,--no-enable-prefix-caching", [&config] { config.prefix_cache = false; },
      "Reuse no cached prompt prefix: every prompt is prefilled in full (for A/B runs of the prefix cache)");
  cmd.add_flag_callback(
      "--enable-prefix-caching", [&config] { config.prefix_cache = true; }, "The default (vLLM's flag, accepted)");
  cmd.add_option("--state-snapshot-interval", config.state_snapshot_interval,
                 "Hybrid (gated-delta-net) models: keep the recurrent state for the prefix cache every this many "
                 "tokens, besides each prompt's last page boundary and every 64 output tokens (0 = only there)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  add_speculative_options(cmd, config.speculative);
}

void add_speculative_options(CLI::App& cmd, spec::SpeculativeConfig& spec) {
  cmd.add_option_function<std::string>(
         "--speculative-algorithm",
         [&spec](const std::string& name) { spec.algorithm = spec::parse_spec_algorithm(name); },
         "Speculative decoding: none, ngram (prompt lookup), draft (a small model, --speculative-draft-model), "
         "eagle3 (an EAGLE-3 head, --speculative-draft-model) or dflash (a DFlash block drafter, "
         "--speculative-draft-model)")
      ->check(CLI::IsMember({"none", "ngram", "draft", "eagle3", "dflash"}))
      ->default_str("none");
  cmd.add_option_function<int32_t>(
         "--speculative-num-draft-tokens",
         [&spec](int32_t tokens) {
           spec.num_draft_tokens = tokens;
           spec.num_draft_tokens_given = true;
         },
         "Tokens drafted per sequence and verified in one target pass (dflash: the drafter's block size - 1)")
      ->check(CLI::Range(1, 64))
      ->default_str(std::to_string(spec.num_draft_tokens));
  cmd.add_option("--speculative-max-batch", spec.max_batch,
                 "Verify drafts only while at most this many sequences decode in a step")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd.add_option("--speculative-draft-model", spec.draft_model_dir,
                 "Draft checkpoint folder (same tokenizer as the model) for --speculative-algorithm draft, the "
                 "EAGLE-3 head's folder for eagle3, or the DFlash drafter's for dflash")
      ->transform(model_folder());
  cmd.add_option("--speculative-draft-mem-fraction", spec.draft_mem_fraction,
                 "GPU: the draft model fills device memory up to this share (weights, then its KV pool)")
      ->check(number_in(0.01, 0.9))
      ->capture_default_str();
  cmd.add_option("--speculative-ngram-min", spec.ngram_min, "Shortest suffix the n-gram drafter matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--speculative-ngram-max", spec.ngram_max, "Longest suffix the n-gram drafter matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--speculative-inject-reject-rate", spec.inject_reject_rate,
                 "Benchmarks: turn each draft token wrong with this probability (speed at a chosen acceptance)")
      ->check(number_in(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--speculative-min-accept-rate", spec.min_accept_rate,
                 "Pause a request's drafting while its moving acceptance rate is below this (0 = never)")
      ->check(number_in(0.0, 1.0))
      ->capture_default_str();
}

}  // namespace rs::app
