#!/usr/bin/env python3
"""CTest for speculative decoding end to end (`radixserve generate --speculative-algorithm ...`, which runs the
request through serve's scheduler) on the tiny fixtures, CPU. For every attention architecture, in exact f32: plain greedy output,
then n-gram drafting, the same checkpoint as its own draft model (acceptance must be 100%) and a different random
checkpoint as the draft (acceptance low), each with page size 8 and a prompt long enough to cross pages and sliding
windows, must give token-for-token the plain output. A seeded temperature-0.8 run must also equal its plain run:
verification samples every drafted position with the seeded stream a plain step would use, so rejection sampling
keeps the output itself, not only its distribution (given numerics that do not depend on the rows in a pass: exact
f32 on the CPU, or the fast path with --enable-deterministic-inference, also checked). Hybrid (gated-delta-net) models
speculate too (an attention draft model, themselves as drafts with and without injected rejections;
rejected tokens roll the recurrent state back to a checkpoint, in the target and in a hybrid draft) with the same
identity, and a hybrid drafts for an attention model.

EAGLE-3 heads (tests/data/eagle3): identity with a random head, and a constructed exact head on a constructed target
whose first drafts are always right (check_eagle3).

Through `serve` (the demo model as its own draft): the usage extension of completions, streamed and not, and the
speculative counters in /metrics.

Usage: speculative_test.py RADIXSERVE MODELS_DIR DEMO_MODEL_DIR"""
import json
import pathlib
import subprocess
import sys
import urllib.request

from radixserve_server import Server
from test_checks import check

ATTENTION_MODELS = ["llama", "llama_bf16", "qwen3", "qwen3_moe", "gpt_oss", "gpt_oss_mxfp4"]
SEEDED_MODELS = ["llama_bf16", "qwen3_moe", "gpt_oss"]  # also run seeded at temperature 0.8 (time: CI has 2 cores)
HYBRID_MODELS = ["qwen3_next", "qwen3_5", "qwen3_5_moe"]
OTHER_DRAFT = {"llama": "qwen3"}  # any other fixture of the same vocabulary; default below


def generate(binary: str, model: pathlib.Path, prompt: list, new_tokens: int, extra: list) -> dict:
    command = [binary, "generate", "--model", str(model), "--prompt-ids", ",".join(map(str, prompt)),
               "--max-new-tokens", str(new_tokens), "--ignore-eos", "--page-size", "8", "--threads", "2"] + extra
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    check(run.returncode == 0, f"{' '.join(command[:4])} {' '.join(extra)} failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    binary, models = sys.argv[1], pathlib.Path(sys.argv[2])
    # 150 tokens: a 30-token unit five times with a few changes, so n-gram lookup finds matches but not only matches.
    unit = [(i * 37 + 11) % 500 + 1 for i in range(30)]
    prompt = []
    for rep in range(5):
        prompt += [t if (i + rep) % 11 else (t * 3) % 500 for i, t in enumerate(unit)]
    new_tokens = 64
    ngram_verifies = 0
    for name in ATTENTION_MODELS:
        model = models / name
        other = models / OTHER_DRAFT.get(name, "llama")
        # Identity needs numerics that do not depend on how many rows a pass carries: exact f32. The fast path rounds
        # activations to bf16 for GEMMs of more than 4 rows (a verify pass) but not for a 1-row decode step, as it does
        # whenever a batch's size changes, so a near-tie can flip (gpt_oss_mxfp4 does at token 33). The fast path is
        # checked below for acceptance only.
        samplings = [["--temperature", "0", "--exact-f32"]]
        if name in SEEDED_MODELS:
            samplings.append(["--temperature", "0.8", "--top-p", "0.95", "--seed", "7", "--exact-f32"])
        for sampling in samplings:
            plain = generate(binary, model, prompt, new_tokens, sampling)
            check(len(plain["output_ids"]) == new_tokens, f"{name}: plain run gave {len(plain['output_ids'])} tokens")
            runs = {
                "ngram": ["--speculative-algorithm", "ngram", "--speculative-num-draft-tokens", "4"],
                "self-draft": ["--speculative-algorithm", "draft", "--speculative-draft-model", str(model),
                               "--speculative-num-draft-tokens", "5"],
                "other-draft": ["--speculative-algorithm", "draft", "--speculative-draft-model", str(other),
                                "--speculative-num-draft-tokens", "3", "--speculative-min-accept-rate", "0"],
            }
            for label, args in runs.items():
                result = generate(binary, model, prompt, new_tokens, sampling + args)
                spec = result["speculative"]
                check(result["output_ids"] == plain["output_ids"],
                      f"{name} {label} {sampling}: output differs from plain decoding\n"
                      f"  plain {plain['output_ids']}\n  spec  {result['output_ids']}")
                if label == "ngram":
                    ngram_verifies += spec["verify_steps"]  # a random model may never repeat itself
                else:
                    check(spec["verify_steps"] > 0, f"{name} {label}: nothing verified: {spec}")
                if label == "self-draft" and sampling[1] == "0":
                    check(spec["acceptance_rate"] == 1.0, f"{name}: its own draft was not always accepted: {spec}")
                    check(spec["accept_length"] > 4.0, f"{name}: accept length {spec['accept_length']} with K=5")
                if label == "other-draft":
                    check(spec["acceptance_rate"] < 0.5, f"{name}: a different random draft accepted often: {spec}")
                print(f"{name:14} {label:11} T={sampling[1]} exact: identical, acceptance {spec['acceptance_rate']:.2f}, "
                      f"accept length {spec['accept_length']:.2f} over {spec['verify_steps']} verify steps")
        # The fast path with --enable-deterministic-inference: row-invariant kernels make the verify pass agree
        # with decode steps bit for bit, so the identity holds there too and a model drafting for itself is always
        # right.
        fast = ["--temperature", "0", "--enable-deterministic-inference"]
        plain = generate(binary, model, prompt, new_tokens, fast)
        result = generate(binary, model, prompt, new_tokens, fast + ["--speculative-algorithm", "draft",
                                                                      "--speculative-draft-model", str(model)])
        check(result["output_ids"] == plain["output_ids"], f"{name}: deterministic fast path, output differs")
        check(result["speculative"]["acceptance_rate"] == 1.0,
              f"{name}: deterministic fast path, its own draft was rejected: {result['speculative']}")
        print(f"{name:14} self-draft  T=0 fast deterministic: identical, acceptance 1.00")
    check(ngram_verifies > 20, f"n-gram drafts were verified only {ngram_verifies} times over all models")
    # An always-right draft with injected rejections: the seeded injection gives the same acceptance whatever the
    # model, so a hybrid draft that rolled its state back wrongly would show as lower acceptance than this.
    injected = ["--speculative-algorithm", "draft", "--speculative-num-draft-tokens", "4",
                "--speculative-inject-reject-rate", "0.3", "--speculative-min-accept-rate", "0"]
    attention_injected = generate(binary, models / "llama", prompt, new_tokens,
                                  ["--temperature", "0", "--exact-f32", "--speculative-draft-model",
                                   str(models / "llama")] + injected)["speculative"]
    for name in HYBRID_MODELS:
        # The verify pass runs a hybrid sequence's tokens one at a time through its gated-delta-net layers (as decode
        # steps do) and keeps the state after each; a rejection copies the kept state back. Prefix caching (state
        # snapshots) stays on.
        model, exact = models / name, ["--temperature", "0", "--exact-f32"]
        plain = generate(binary, model, prompt, new_tokens, exact)
        runs = {  # (n-gram drafts: the scheduler path is the same as other-draft's, and random models rarely repeat)
            "other-draft": ["--speculative-algorithm", "draft", "--speculative-draft-model", str(models / "llama"),
                            "--speculative-num-draft-tokens", "3", "--speculative-min-accept-rate", "0"],
            # The hybrid as its own draft (its drafter keeps state checkpoints too): every draft right, then a third
            # of the draft tokens turned wrong, so both models roll back to checkpoints in the middle of drafts.
            "self-draft": ["--speculative-algorithm", "draft", "--speculative-draft-model", str(model),
                           "--speculative-num-draft-tokens", "4"],
            "self-draft-30%-wrong": ["--speculative-draft-model", str(model)] + injected,
        }
        for label, args in runs.items():
            result = generate(binary, model, prompt, new_tokens, exact + args)
            spec = result["speculative"]
            check(result["output_ids"] == plain["output_ids"],
                  f"{name} {label}: output differs from plain decoding\n"
                  f"  plain {plain['output_ids']}\n  spec  {result['output_ids']}")
            check(spec["verify_steps"] > 0, f"{name} {label}: nothing verified: {spec}")
            if label == "other-draft":
                check(spec["acceptance_rate"] < 0.5, f"{name}: a different random draft accepted often: {spec}")
            if label == "self-draft":
                check(spec["acceptance_rate"] == 1.0, f"{name}: its own draft was not always accepted: {spec}")
            if label == "self-draft-30%-wrong":
                check(0.2 < spec["acceptance_rate"] < 0.95, f"{name}: injected rejections not seen: {spec}")
                check((spec["accepted_tokens"], spec["draft_tokens"]) ==
                      (attention_injected["accepted_tokens"], attention_injected["draft_tokens"]),
                      f"{name}: its own draft with injected rejections {spec}, an attention model's "
                      f"{attention_injected}: the draft's state was not rolled back right")
            print(f"{name:14} {label:11} T=0 exact: identical, acceptance {spec['acceptance_rate']:.2f}, "
                  f"accept length {spec['accept_length']:.2f} over {spec['verify_steps']} verify steps")
    # A hybrid drafting for an attention model.
    plain = generate(binary, models / "llama", prompt, new_tokens, ["--temperature", "0", "--exact-f32"])
    result = generate(binary, models / "llama", prompt, new_tokens,
                      ["--temperature", "0", "--exact-f32", "--speculative-algorithm", "draft",
                       "--speculative-draft-model", str(models / "qwen3_next"), "--speculative-min-accept-rate", "0"])
    check(result["output_ids"] == plain["output_ids"], "llama drafted by qwen3_next: output differs from plain")
    check(result["speculative"]["verify_steps"] > 0, f"llama drafted by qwen3_next: {result['speculative']}")
    print("llama          hybrid-draft T=0 exact: identical")
    check_eagle3(binary, models, prompt, new_tokens)
    check_server(binary, sys.argv[3])
    print("speculative decoding: every run matched plain decoding")


def check_eagle3(binary: str, models: pathlib.Path, prompt: list, new_tokens: int) -> None:
    """EAGLE-3 heads (tests/data/eagle3, tools/make_eagle3_head.py): random heads on the llama, qwen3, gpt_oss and
    qwen3_next fixtures must leave the output as plain decoding's (greedy; llama also seeded sampling); the cycle target's exact head, which reads the token two
    positions ahead off the target's features of a position, must have every first draft token accepted, and only
    those: its later drafts repeat the first (its own output carries no new information). The same head as
    pytorch_model.bin must do the same. cycle_head_shared (--self-attending) has no LM head (it takes the target's)
    and drafts every token right, those of its self-fed draft steps included: acceptance 1.00 at every K."""
    heads = models.parent / "eagle3"
    greedy, seeded = ["--temperature", "0", "--exact-f32"], ["--temperature", "0.8", "--top-p", "0.95", "--seed", "7",
                                                            "--exact-f32"]
    # Random heads on targets of each family (dense, windows and sinks, hybrid gated-delta-net); llama_head_tied
    # predicts through the target's embedding table (tie_word_embeddings, no lm_head of its own).
    for name, head_name, samplings in (("llama", "llama_head", [greedy, seeded]), ("qwen3", "qwen3_head", [greedy]),
                                       ("gpt_oss", "gpt_oss_head", [greedy]),
                                       ("qwen3_next", "qwen3_next_head", [greedy]),
                                       ("llama", "llama_head_tied", [greedy])):
        target, head = models / name, heads / head_name
        for sampling in samplings:
            plain = generate(binary, target, prompt, new_tokens, sampling)
            result = generate(binary, target, prompt, new_tokens,
                              sampling + ["--speculative-algorithm", "eagle3", "--speculative-draft-model", str(head),
                                          "--speculative-min-accept-rate", "0"])
            check(result["output_ids"] == plain["output_ids"], f"{name} eagle3 {sampling}: output differs from plain")
            check(result["speculative"]["verify_steps"] > 0, f"{name} eagle3: nothing verified: {result['speculative']}")
            print(f"{name:14} eagle3      T={sampling[1]} exact: identical over "
                  f"{result['speculative']['verify_steps']} verify steps (random head {head_name})")
    llama, head = models / "llama", heads / "llama_head"
    target, exact_head = heads / "cycle_target", heads / "cycle_head"
    exact = ["--temperature", "0", "--exact-f32"]
    plain = generate(binary, target, prompt, new_tokens, exact)
    # (K, fast path, prefill chunk, head): a 40-token chunk makes the head catch up on the prompt in several passes;
    # cycle_head_bin is the same head as pytorch_model.bin (the format most released EAGLE-3 heads ship in);
    # cycle_head_shared drafts through the target's LM head (it has none of its own), and all its drafts are right.
    shared = heads / "cycle_head_shared"
    for k, fast, chunk, head_dir in ((1, False, 2048, exact_head), (4, False, 2048, exact_head),
                                     (1, False, 40, exact_head), (2, True, 2048, exact_head),
                                     (1, False, 2048, heads / "cycle_head_bin"), (1, False, 2048, shared),
                                     (4, False, 40, shared), (7, False, 2048, shared)):
        sampling = ["--temperature", "0", "--enable-deterministic-inference"] if fast else exact
        result = generate(binary, target, prompt, new_tokens,
                          sampling + ["--speculative-algorithm", "eagle3", "--speculative-draft-model", str(head_dir),
                                      "--speculative-num-draft-tokens", str(k), "--prefill-chunk", str(chunk)])
        spec = result["speculative"]
        check(result["output_ids"] == plain["output_ids"], f"cycle eagle3 K={k}: output differs from plain")
        if head_dir == shared:
            check(spec["verify_steps"] > 0 and spec["accepted_tokens"] == spec["draft_tokens"],
                  f"cycle eagle3 K={k} {head_dir.name}: every draft token must be accepted: {spec}")
        else:
            check(spec["verify_steps"] > 0 and spec["accepted_tokens"] == spec["verify_steps"],
                  f"cycle eagle3 K={k} {head_dir.name}: the exact head's first drafts must all be accepted, and no "
                  f"others: {spec}")
        print(f"cycle_target   eagle3 K={k}  T=0 {'fast' if fast else 'exact'} chunk {chunk} {head_dir.name}: identical, "
              f"accept length {spec['accept_length']:.2f}, acceptance {spec['acceptance_rate']:.2f}")
    # Six requests drafting in the same steps, catching up on their prompts in several passes of a 64-token budget.
    command = [binary, "bench", "throughput", "--model", str(target), "--num-prompts", "6", "--input-len", "150",
               "--output-len", "40", "--exact-f32", "--threads", "2", "--max-prefill-tokens", "64",
               "--speculative-algorithm", "eagle3", "--speculative-draft-model", str(exact_head),
               "--speculative-num-draft-tokens", "1"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    line = [row for row in run.stdout.splitlines() if row.startswith("Speculative accept length")]
    check(run.returncode == 0 and line and " / 100.0% (" in line[0],
          f"six concurrent requests with the exact head: {line or run.stderr[-1000:]}")
    print(f"cycle_target   eagle3 K=1  6 concurrent requests: {line[0].split('rate')[-1].strip()}")
    # Misuse fails with a clear error.
    for algorithm, draft, expected in (("eagle3", llama, "neither an EAGLE-3 head"),
                                       ("draft", head, "use --speculative")):
        command = [binary, "generate", "--model", str(llama), "--prompt-ids", "1,2,3", "--max-new-tokens", "2",
                   "--speculative-algorithm", algorithm, "--speculative-draft-model", str(draft)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=120)
        check(run.returncode != 0 and expected in run.stderr,
              f"{algorithm} with {draft.name}: expected an error naming '{expected}', got rc {run.returncode}:\n"
              f"{run.stderr[-500:]}")


def post(url: str, body: dict) -> bytes:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()


def check_server(binary: str, demo: str) -> None:
    server = Server(binary, demo, ["--speculative-algorithm", "draft", "--speculative-draft-model", demo,
                                   "--speculative-num-draft-tokens", "4"])
    body = {"model": "radixserve-demo", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0,
            "ignore_eos": True}
    reply = json.loads(post(server.url + "/v1/completions", body))
    usage = reply["usage"]
    check(usage["completion_tokens"] == 40, f"usage: {usage}")
    spec = usage.get("speculative")
    check(spec is not None and spec["verify_steps"] > 0 and spec["accept_length"] > 1.5,
          f"no speculative usage from its own draft model: {usage}")
    # Streamed with include_usage: the last chunk carries the same extension, and the text is the same.
    streamed = post(server.url + "/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
    chunks = [json.loads(line[6:]) for line in streamed.decode().splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    text = "".join(c["choices"][0]["text"] for c in chunks if c.get("choices"))
    check(text == reply["choices"][0]["text"], f"streamed text differs:\n{text!r}\n{reply['choices'][0]['text']!r}")
    check("speculative" in chunks[-1]["usage"], f"last chunk without speculative usage: {chunks[-1]}")
    metrics = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    accepted = [line for line in metrics.splitlines() if line.startswith("radixserve_spec_accepted_tokens_total")]
    check(accepted and float(accepted[0].split()[-1]) > 0, f"no accepted tokens in /metrics: {accepted}")
    # The costs behind the counts: the drafter's proposals and the steps that verified them.
    for name in ("radixserve_spec_draft_calls_total", "radixserve_spec_draft_seconds_total",
                 "radixserve_spec_verify_steps_total", "radixserve_spec_verify_step_seconds_total"):
        value = [line for line in metrics.splitlines() if line.startswith(name)]
        check(value and float(value[0].split()[-1]) > 0, f"{name} missing or zero in /metrics: {value}")
    server.stop()
    print(f"serve: usage.speculative {spec}")


if __name__ == "__main__":
    main()
