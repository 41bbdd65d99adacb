#include <unistd.h>

#include <cstdio>
#include <string>

#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/commands.h"

namespace rs::app {

void add_engine_options(CLI::App& command, engine::EngineConfig& config) {
  command.add_option("--backend", config.backend, "Device backend: cpu or cuda[:N]")->capture_default_str();
  command.add_option("--threads", config.num_threads, "CPU threads (0 = all cores)")->capture_default_str();
  command
      .add_option("--tensor-parallel-size,--tp", config.tensor_parallel_size,
                  "Split the model over this many ranks (attention heads, MLP width and vocabulary; CPU ranks in "
                  "this process for now, each with its share of --threads)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command.add_flag("--expert-parallel,--enable-expert-parallel", config.expert_parallel,
                   "With --tensor-parallel-size: keep MoE experts whole and give each rank a block of them (vLLM's "
                   "expert parallelism) instead of a share of every expert's width");
  command.add_flag("--exact-f32", config.exact_f32,
                   "Compute bf16-weight products in exact f32 instead of bf16 x bf16 (reference numerics; slower)");
  command
      .add_option("--load-format", config.load_format,
                  "auto (safetensors) or dummy (seeded random weights for a config-only folder)")
      ->check(CLI::IsMember({"auto", "safetensors", "dummy"}))
      ->capture_default_str();
  command
      .add_option("--quantization", config.quantization,
                  "Quantize a bf16/f32 checkpoint's projections as they load: fp8 (E4M3, one scale per output "
                  "channel; the LM head and routers stay as stored). Checkpoints already in FP8 need no flag")
      ->check(CLI::IsMember({"fp8"}));
  command
      .add_option("--task", config.task,
                  "generate, embed (serve /v1/embeddings: the last token's final-normed hidden state, as "
                  "Qwen3-Embedding pools), or auto (embed for embedding checkpoints: a sentence-transformers "
                  "folder or a *Model architecture)")
      ->check(CLI::IsMember({"auto", "generate", "embed"}))
      ->capture_default_str();
  command.add_option("--page-size", config.page_size, "Tokens per KV page")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command
      .add_option("--kv-cache-gb", config.kv_cache_gb,
                  "KV cache (and recurrent-state) budget in GiB (0 = derive from free memory)")
      ->check(non_negative_number())
      ->capture_default_str();
  command
      .add_option("--num-state-slots", config.num_state_slots,
                  "Recurrent-state slots of hybrid (gated-delta-net) models: one per running request, the rest "
                  "keep prefix-cache snapshots; 0 = auto (twice the max running requests, within half the memory "
                  "budget)")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  command
      .add_option("--context-length,--max-model-len", config.context_length,
                  "Max tokens per sequence (0 = the model's)")
      ->check(non_negative_number());
  command
      .add_option_function<std::string>(
          "--kv-cache-dtype",
          [&config](const std::string& name) {
            config.kv_cache_dtype = name == "bf16"                        ? engine::KvCacheDtype::kBf16
                                    : name == "f32"                       ? engine::KvCacheDtype::kF32
                                    : name == "fp8" || name == "fp8_e4m3" ? engine::KvCacheDtype::kFp8E4M3
                                                                          : engine::KvCacheDtype::kAuto;
          },
          "KV cache element type: auto (the weights' dtype; f32 with --exact-f32), bf16, f32, or fp8_e4m3 (alias "
          "fp8): one byte per value, half bf16's memory, with the checkpoint's per-layer k_scale/v_scale (else 1)")
      ->check(CLI::IsMember({"auto", "bf16", "f32", "fp8", "fp8_e4m3"}))
      ->default_str("auto");
  command
      .add_option("--mem-fraction-static,--gpu-memory-utilization", config.mem_fraction_static,
                  "GPU: fraction of device memory for weights and the KV cache (the rest: activations, graphs)")
      ->check(number_in(0.05, 0.99))
      ->capture_default_str();
  command
      .add_option("--cuda-graph-max-bs", config.cuda_graph_max_batch,
                  "GPU: largest decode batch replayed as a CUDA graph (-1 = --max-running-requests)")
      ->check(CLI::Range(-1, 4096))
      ->capture_default_str();
  command
      .add_option(
          "--attention-backend", config.attention_backend,
          "GPU attention kernel: auto or flash (tensor cores for a bf16 or fp8 KV cache of head_dim 64/128/256 outside "
          "--exact-f32) or cuda-core (the CUDA-core kernel everywhere)")
      ->check(CLI::IsMember({"auto", "flash", "cuda-core"}))
      ->capture_default_str();
  command.add_flag_callback(
      "--disable-cuda-graph", [&config] { config.cuda_graph_max_batch = 0; }, "GPU: run every step eagerly");
  command.add_flag("--enable-deterministic-inference", config.deterministic,
                   "Batch-invariant numerics: a seeded or greedy request gives the same output alone or beside any "
                   "others (one kernel "
                   "per op for every token count on CPU and CUDA; costs decode speed)");
  command.add_flag_callback(
      "--disable-pdl", [&config] { config.programmatic_launch = false; },
      "GPU: launch kernels without programmatic dependent launch (each waits for the previous one to end)");
}

std::function<void(const std::string&, double)> make_progress_reporter() {
  const bool tty = ::isatty(STDERR_FILENO);
  auto last_tenth = std::make_shared<int>(-1);
  return [tty, last_tenth](const std::string& what, double fraction) {
    const int percent = static_cast<int>(fraction * 100);
    if (tty) {
      const int filled = percent / 4;
      std::fprintf(stderr, "\r%s [%.*s%*s] %3d%%", what.c_str(), filled, "#########################", 25 - filled, "",
                   percent);
      if (percent >= 100) std::fputc('\n', stderr);
      std::fflush(stderr);
    } else if (percent / 10 != *last_tenth) {
      *last_tenth = percent / 10;
      std::fprintf(stderr, "%s: %d%%\n", what.c_str(), percent);
    }
  };
}

}  // namespace rs::app
