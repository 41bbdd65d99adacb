#!/usr/bin/env python3
"""CTest for DFlash drafting end to end (`radixserve generate --speculative-algorithm dflash`, serve's scheduler), CPU,
on the fixtures of tools/make_dflash_fixture.py (tests/data/dflash):

- random drafters beside the llama, qwen3 (tied LM head), qwen3_moe, gpt_oss (windows, sinks) and qwen3_next (hybrid:
  rejected tokens roll the target's recurrent state back) fixtures leave the output exactly plain decoding's, greedy
  and (llama) seeded sampling, whatever they propose;
- the cycle target's exact drafter, whose mask rows all read the block's first row (the last committed token), has
  the first draft token of every block accepted and no other (accept length exactly 2): as one request, with the
  prompt's context fed in several 40-token passes, and as six requests drafting in the same steps;
- misuse fails at start with a clear error: a draft length other than the block's, a drafter under another
  algorithm, another checkpoint under dflash.

Usage: speculative_dflash_test.py RADIXSERVE MODELS_DIR"""
import pathlib
import subprocess
import sys

from speculative_test import generate
from test_checks import check

RANDOM_TARGETS = [("llama", True), ("qwen3", False), ("qwen3_moe", False), ("gpt_oss", False), ("qwen3_next", False)]


def main() -> None:
    binary, models = sys.argv[1], pathlib.Path(sys.argv[2])
    fixtures = models.parent / "dflash"
    unit = [(i * 37 + 11) % 500 + 1 for i in range(30)]
    prompt = [t if (i + rep) % 11 else (t * 3) % 500 for rep in range(5) for i, t in enumerate(unit)]
    greedy = ["--temperature", "0", "--exact-f32"]
    seeded = ["--temperature", "0.8", "--top-p", "0.95", "--seed", "7", "--exact-f32"]
    for name, also_seeded in RANDOM_TARGETS:
        target, drafter = models / name, fixtures / f"{name}_drafter"
        for sampling in [greedy, seeded] if also_seeded else [greedy]:
            plain = generate(binary, target, prompt, 48, sampling)
            result = generate(binary, target, prompt, 48,
                              sampling + ["--speculative-algorithm", "dflash", "--speculative-draft-model",
                                          str(drafter), "--speculative-min-accept-rate", "0"])
            spec = result["speculative"]
            check(result["output_ids"] == plain["output_ids"], f"{name} dflash {sampling}: output differs from plain")
            check(spec["verify_steps"] > 0 and spec["num_draft_tokens"] == 3,
                  f"{name} dflash: expected verify passes of 3 drafts: {spec}")
            print(f"{name:12} dflash T={sampling[1]} exact: identical over {spec['verify_steps']} verify passes "
                  f"(random drafter, acceptance {spec['acceptance_rate']:.2f})")

    target, exact = fixtures / "cycle_target", fixtures / "cycle_drafter"
    plain = generate(binary, target, prompt, 64, greedy)
    for chunk in (2048, 40):
        result = generate(binary, target, prompt, 64, greedy + [
            "--speculative-algorithm", "dflash", "--speculative-draft-model", str(exact), "--prefill-chunk", str(chunk)])
        spec = result["speculative"]
        check(result["output_ids"] == plain["output_ids"], f"cycle dflash chunk {chunk}: output differs from plain")
        check(spec["verify_steps"] > 0 and spec["accepted_tokens"] == spec["verify_steps"],
              f"cycle dflash chunk {chunk}: every block's first draft must be accepted, and no other: {spec}")
        print(f"cycle_target dflash chunk {chunk}: identical, accept length {spec['accept_length']:.2f} over "
              f"{spec['verify_steps']} verify passes")
    command = [binary, "bench", "throughput", "--model", str(target), "--num-prompts", "6", "--input-len", "150",
               "--output-len", "40", "--exact-f32", "--threads", "2", "--max-prefill-tokens", "64",
               "--speculative-algorithm", "dflash", "--speculative-draft-model", str(exact)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    line = [row for row in run.stdout.splitlines() if row.startswith("Speculative accept length")]
    check(run.returncode == 0 and line and line[0].split()[-7] == "2.00",
          f"six concurrent requests with the exact drafter: accept length must be 2.00: {line or run.stderr[-1000:]}")
    print(f"cycle_target dflash 6 concurrent requests: {line[0].split('rate')[-1].strip()}")

    llama = models / "llama"
    for algorithm, draft, extra, expected in (
            ("dflash", exact, ["--speculative-num-draft-tokens", "5"], "does not match the DFlash drafter's block"),
            ("eagle3", exact, [], "use --speculative-algorithm dflash"),
            ("dflash", llama, [], "not a DFlash drafter")):
        command = [binary, "generate", "--model", str(target), "--prompt-ids", "1,2,3", "--max-new-tokens", "2",
                   "--speculative-algorithm", algorithm, "--speculative-draft-model", str(draft)] + extra
        run = subprocess.run(command, capture_output=True, text=True, timeout=120)
        check(run.returncode != 0 and expected in run.stderr,
              f"{algorithm} with {draft.name} {extra}: expected an error naming '{expected}', got rc {run.returncode}:"
              f"\n{run.stderr[-500:]}")
    print("dflash: every run matched plain decoding; misuse refused")


if __name__ == "__main__":
    main()
