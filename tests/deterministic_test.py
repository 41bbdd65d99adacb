#!/usr/bin/env python3
"""CTest for --enable-deterministic-inference on the fast path (bf16 GEMMs), CPU by default:
1. `generate`, seeded at temperature 0.8, gives the same tokens whether the prompt is prefilled in one step or in
   chunks of 7 tokens, on a windowed model (gpt_oss) and on hybrid gated-delta-net models (qwen3_next, qwen3_5);
   with --backend cuda also on bf16 dense, MoE and MXFP4 fixtures, and with a bf16 KV cache (the tensor-core
   attention kernel) as well as the model's own;
2. through `serve` (the demo model), a seeded request returns the same text alone and beside 12 concurrent requests
   of other prompts and lengths (the issue's repro: without the flag the fast path changes kernels with the batch).

Usage: deterministic_test.py RADIXSERVE MODELS_DIR DEMO_MODEL_DIR [--backend cuda]
(tools/device_test_cuda.sh runs it with --backend cuda on the GPU machine)"""
import concurrent.futures
import json
import pathlib
import subprocess
import sys
import urllib.request

from radixserve_server import Server
from test_checks import check

CHUNKED_MODELS = ["gpt_oss", "qwen3_next", "qwen3_5"]
CUDA_MODELS = CHUNKED_MODELS + ["llama_bf16", "qwen3_moe", "gpt_oss_mxfp4"]


def generate(binary: str, model: pathlib.Path, prompt: list, extra: list) -> list:
    command = [binary, "generate", "--model", str(model), "--prompt-ids", ",".join(map(str, prompt)),
               "--max-new-tokens", "40", "--ignore-eos", "--threads", "2", "--temperature", "0.8", "--seed", "11",
               "--enable-deterministic-inference"] + extra
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    check(run.returncode == 0, f"{' '.join(command[:4])} {' '.join(extra)} failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])["output_ids"]


def complete(url: str, prompt: str, max_tokens: int, seed: int) -> str:
    body = {"model": "radixserve-demo", "prompt": prompt, "max_tokens": max_tokens, "temperature": 1.0,
            "seed": seed, "ignore_eos": True}
    request = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["choices"][0]["text"]


def main() -> None:
    binary, models, demo = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "cpu"
    on_cpu = backend == "cpu"
    prompt = [(i * 53 + 7) % 500 + 1 for i in range(90)]
    # Also with an fp8 KV cache, and on a GPU with a bf16 one: f32 fixtures otherwise keep an f32 cache (on CUDA the
    # CUDA-core attention kernel; bf16 and fp8 caches take the tensor cores).
    variants = [[], ["--kv-cache-dtype", "fp8"]]
    if not on_cpu:
        variants.append(["--kv-cache-dtype", "bf16"])
    for name in CHUNKED_MODELS if on_cpu else CUDA_MODELS:
        for variant in variants:
            extra = ["--backend", backend] + variant
            whole = generate(binary, models / name, prompt, ["--prefill-chunk", "512"] + extra)
            chunked = generate(binary, models / name, prompt, ["--prefill-chunk", "7"] + extra)
            check(whole == chunked, f"{name} {variant}: chunked prefill changed the seeded output\n  {whole}\n  {chunked}")
            print(f"{name} on {backend} {' '.join(variant)}: prefill in one step or in 7-token chunks: identical")

    server = Server(binary, demo, ["--enable-deterministic-inference", "--max-running-requests", "16", "--backend",
                                   backend])
    probe = "Once upon a time there was a little fox who"
    alone = complete(server.url, probe, 48, 42)
    others = [(f"The {word} went to the market and", 20 + 7 * i, i) for i, word in
              enumerate(["dog", "cat", "king", "girl", "boy", "bird", "farmer", "queen", "mouse", "wolf", "owl", "bear"])]
    for attempt in range(2):
        with concurrent.futures.ThreadPoolExecutor(max_workers=13) as pool:
            futures = [pool.submit(complete, server.url, p, n, s) for p, n, s in others]
            beside = pool.submit(complete, server.url, probe, 48, 42)
            for future in futures:
                future.result()
            text = beside.result()
        check(text == alone, f"attempt {attempt}: seeded output changed beside 12 requests\n  {alone!r}\n  {text!r}")
    server.stop()
    print("serve: a seeded request gave the same text alone and beside 12 concurrent requests")


if __name__ == "__main__":
    main()
