#!/usr/bin/env python3
"""Prompt logprobs (completions' echo + logprobs, max_tokens 0, vLLM's prompt_logprobs on both endpoints), computed in
the prefill: a greedy continuation scored as a prompt must get, token by token, the logprob the decode steps reported
when they produced it, with rank 1, across chunked prefill (chunks of 8 tokens here) and after the prompt was cached.

usage: prompt_logprobs_test.py RADIXSERVE MODEL_DIR
env: RS_SERVER_ARGS (more serve flags, e.g. "--backend cuda"), RS_LOGPROB_TOL (2e-4: prefill vs decode logprobs; a GPU's
     prefill and decode kernels round differently)"""
import json
import os
import sys
import urllib.request

from radixserve_server import Server
from test_checks import check


def post(url: str, path: str, body: dict):
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main() -> None:
    binary, model = sys.argv[1], sys.argv[2]
    tolerance = float(os.environ.get("RS_LOGPROB_TOL", "2e-4"))
    server = Server(binary, model, ["--load-format", "dummy", "--chunked-prefill-size", "8",
                                    *os.environ.get("RS_SERVER_ARGS", "").split()])
    url = server.url
    prompt = [5, 17, 99, 3, 250, 41, 7, 8, 9, 10, 11, 12]

    # A greedy continuation with the logprob of each token as the decode steps saw it.
    status, text = post(url, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0, "logprobs": 1,
                                                 "ignore_eos": True, "return_token_ids": True})
    check(status == 200, text)
    generated = json.loads(text)["choices"][0]
    continuation, decode_logprobs = generated["token_ids"], generated["logprobs"]["token_logprobs"]
    check(len(continuation) == 8, f"expected 8 tokens: {continuation}")
    full = prompt + continuation

    # Scored as a prompt (20 tokens: three prefill chunks): the same logprobs, rank 1, the first position null.
    status, text = post(url, "/v1/completions", {"prompt": full, "max_tokens": 0, "echo": True, "logprobs": 2,
                                                 "prompt_logprobs": 2})
    check(status == 200, text)
    choice = json.loads(text)["choices"][0]
    usage = json.loads(text)["usage"]
    check(choice["finish_reason"] == "length" and usage["completion_tokens"] == 0, f"{choice} {usage}")
    scored = choice["logprobs"]["token_logprobs"]
    check(len(scored) == len(full) and scored[0] is None and choice["logprobs"]["top_logprobs"][0] is None,
          f"echo logprobs: {len(scored)} entries for {len(full)} prompt tokens, first {scored[0]}")
    worst = 0.0
    for k, expected in enumerate(decode_logprobs):
        got = scored[len(prompt) + k]
        worst = max(worst, abs(got - expected))
        check(abs(got - expected) < tolerance, f"token {k} of the continuation: scored {got}, decoded with {expected}")
    prompt_logprobs = choice["prompt_logprobs"]
    check(len(prompt_logprobs) == len(full) and prompt_logprobs[0] is None, "prompt_logprobs: one per token")
    for k, token in enumerate(continuation):
        entry = prompt_logprobs[len(prompt) + k][str(token)]
        check(entry["rank"] == 1, f"greedy token {token} at {len(prompt) + k} has rank {entry['rank']}")
    check(choice["text"] != "" or all(t < 32 for t in full), "echo returns the prompt's text")

    # A cached prompt is scored again in full (the cache holds no logits): the same numbers, no cached tokens.
    status, _ = post(url, "/v1/completions", {"prompt": full, "max_tokens": 1})
    check(status == 200, "warming the cache failed")
    status, text = post(url, "/v1/completions", {"prompt": full, "max_tokens": 0, "prompt_logprobs": 2})
    again = json.loads(text)
    check(again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, f"scored from the cache: {again['usage']}")
    check(again["choices"][0]["prompt_logprobs"] == prompt_logprobs, "a second scoring of the prompt differs")

    # Streaming: the first chunk carries the echoed prompt's logprobs.
    status, text = post(url, "/v1/completions", {"prompt": full, "max_tokens": 2, "echo": True, "logprobs": 1,
                                                 "stream": True})
    chunks = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    first = chunks[0]["choices"][0]["logprobs"]
    check(first["token_logprobs"][0] is None and len(first["token_logprobs"]) >= len(full),
          f"first streamed chunk: {first['token_logprobs'][:3]}")
    check(abs(first["token_logprobs"][len(prompt)] - decode_logprobs[0]) < tolerance, "streamed prompt logprobs differ")

    # Chat: vLLM's prompt_logprobs over the templated prompt.
    status, text = post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hello there"}],
                                                      "max_tokens": 2, "prompt_logprobs": 0})
    check(status == 200, text)
    answer = json.loads(text)
    entries = answer["choices"][0]["prompt_logprobs"]
    check(len(entries) == answer["usage"]["prompt_tokens"] and entries[0] is None and
          all(len(e) == 1 for e in entries[1:]), "chat prompt_logprobs: one entry per prompt token, no alternatives")

    # A one-token prompt: its one entry, null (nothing precedes it).
    status, text = post(url, "/v1/completions", {"prompt": [42], "max_tokens": 1, "prompt_logprobs": 1})
    check(status == 200 and json.loads(text)["choices"][0]["prompt_logprobs"] == [None], f"one token: {text[:300]}")

    status, text = post(url, "/v1/completions", {"prompt": prompt, "max_tokens": 0})
    check(status == 400 and "max_tokens" in text, f"max_tokens 0 without scoring: {status} {text}")
    server.stop()
    print(f"prompt logprobs: {len(full)} tokens scored in chunks of 8 match the decode-time logprobs (largest "
          f"difference {worst:.2e}); cached and streamed scorings agree; chat prompt_logprobs")


if __name__ == "__main__":
    main()
