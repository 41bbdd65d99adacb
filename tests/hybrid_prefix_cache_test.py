#!/usr/bin/env python3
"""CTest for prefix caching of hybrid (gated-delta-net) models through `serve`, CPU, with
--enable-deterministic-inference (the recurrent form of the delta rule: a state does not depend on where prefill
chunks end, so a resumed prompt must give the cold run's tokens exactly).

For qwen3_next and qwen3_5 (page size 8, a snapshot every 64 tokens): a 200-token prompt, then the same prompt
(resumes after 192 tokens: its last page boundary), then its first 150 tokens and 60 others (resumes after 128: the
deepest snapshot it shares), then a second conversation turn: a 100-token prompt answered with 40 tokens, sent back
with the reply and 30 more (resumes after 128: the reply's last output snapshot, taken every 64 tokens), each
against a server without the prefix cache (text and logprobs identical); usage.prompt_tokens_details reports the
reused tokens, and /metrics the snapshots held.

Usage: hybrid_prefix_cache_test.py RADIXSERVE MODELS_DIR"""
import json
import pathlib
import random
import sys
import urllib.request

from radixserve_server import Server
from test_checks import check

MODELS = ["qwen3_next", "qwen3_5"]
FLAGS = ["--skip-tokenizer-init",  # token-id prompts: the fixtures have no tokenizer
         "--enable-deterministic-inference", "--page-size", "8", "--state-snapshot-interval", "64",
         "--kv-cache-gb", "0.05"]


def served_model(url: str) -> str:
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as response:
        return json.loads(response.read())["data"][0]["id"]


def complete(url: str, model: str, prompt: list, max_tokens: int, ids: list = None) -> tuple:
    """(text, logprobs), cached tokens; the sampled token ids are appended to `ids` when given."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "logprobs": 1, "return_token_ids": True}
    request = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        reply = json.loads(response.read())
    usage = reply["usage"]
    choice = reply["choices"][0]
    if ids is not None:
        ids.extend(choice["token_ids"])
    # The text and every sampled token's logprob: a wrong state shows in the logprobs even where greedy agrees.
    return ((choice["text"], choice["logprobs"]["token_logprobs"]),
            usage.get("prompt_tokens_details", {}).get("cached_tokens", 0))


def main() -> None:
    binary, models = sys.argv[1], pathlib.Path(sys.argv[2])
    rng = random.Random(3)
    prompt = [rng.randrange(1, 400) for _ in range(200)]
    extended = prompt[:150] + [rng.randrange(1, 400) for _ in range(60)]
    first_turn = [rng.randrange(1, 400) for _ in range(100)]
    more = [rng.randrange(1, 400) for _ in range(30)]
    for name in MODELS:
        model = str(models / name)
        cold = Server(binary, model, FLAGS + ["--disable-radix-cache"])
        cold_model = served_model(cold.url)
        reply = []  # the first turn's reply, from the cold run
        complete(cold.url, cold_model, first_turn, 40, reply)
        # (prompt, new tokens, tokens reused from the cache)
        cases = [(prompt, 16, 0), (prompt, 16, 192), (extended, 16, 128), (first_turn, 40, 0),
                 (first_turn + reply + more, 16, 128)]
        expected = [complete(cold.url, cold_model, p, n)[0] for p, n, _ in cases]
        cold.stop()
        warm = Server(binary, model, FLAGS)
        warm_model = served_model(warm.url)
        for (p, n, reused), want in zip(cases, expected):
            text, cached = complete(warm.url, warm_model, p, n)
            check(cached == reused, f"{name}: a {len(p)}-token prompt reused {cached} cached tokens, expected {reused}")
            check(text == want, f"{name}: resumed after {reused} tokens, the output (text, logprobs) differs from the "
                                f"cold run:\n{text!r}\nvs\n{want!r}")
        with urllib.request.urlopen(warm.url + "/metrics", timeout=10) as response:
            metrics = response.read().decode()
        snapshots = [line for line in metrics.splitlines() if line.startswith("radixserve_state_snapshots")]
        check(snapshots and float(snapshots[0].split()[-1]) >= 3, f"{name}: snapshots in /metrics: {snapshots}")
        warm.stop()
        print(f"{name}: cold and resumed outputs identical; reused 0 / 192 / 128 / 0 / 128 tokens")
    print("hybrid prefix cache: ok")


if __name__ == "__main__":
    main()
