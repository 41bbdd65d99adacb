#!/usr/bin/env python3
"""Sampling controls through a real `radixserve serve` on any backend, with the standard library only (the GPU machine
has no node, so the e2e tests cannot run there). Starts the server, then checks over HTTP:

  - logit_bias +100 on one token: greedy picks it every step;
  - min_tokens: a stop token that would end the answer at once is banned until min_tokens tokens exist;
  - a seeded temperature-1 request alone and beside concurrent requests (reported, not required: batch invariance);
  - structured output (guided_json, regex): every output validates / fullmatches;
  - streaming delivers the same text as the non-streaming answer.

  tools/serve_check.py SERVER_BINARY MODEL_DIR [extra serve flags...]      exits 1 on the first failed check
"""
import json
import pathlib
import re
import sys
import threading
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from radixserve_server import Server  # noqa: E402


def post(base, path, body, stream=False):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as res:
        if not stream:
            return json.loads(res.read())
        text = ""
        for raw in res:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                text += "".join(c.get("text", "") for c in chunk.get("choices", []))
        return text


def check(ok, what, detail="", required=True):
    print(("  ok    " if ok else "  FAIL  " if required else "  DIFF  ") + what + ("" if ok else f": {detail}"))
    if not ok and required:
        raise SystemExit(1)


def main():
    binary, model, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    server = Server(binary, model, extra, threads=None, startup_s=300)  # /health answers 503 until the model loads
    try:
        base = server.url
        name = json.loads(urllib.request.urlopen(base + "/v1/models").read())["data"][0]["id"]
        req = {"model": name, "prompt": "hello world, this is a test of the server", "temperature": 0,
               "max_tokens": 16, "ignore_eos": True, "return_token_ids": True}

        first = post(base, "/v1/completions", {**req, "max_tokens": 1})["choices"][0]["token_ids"][0]
        favourite = 8 if first == 7 else 7
        biased = post(base, "/v1/completions", {**req, "max_tokens": 5, "logit_bias": {str(favourite): 100}})
        check(biased["choices"][0]["token_ids"] == [favourite] * 5, "logit_bias +100 wins every step",
              biased["choices"][0]["token_ids"])

        stoppable = {k: v for k, v in req.items() if k != "ignore_eos"}
        stopped = post(base, "/v1/completions", {**stoppable, "max_tokens": 8, "stop_token_ids": [first]})
        check(stopped["choices"][0]["finish_reason"] == "stop" and stopped["usage"]["completion_tokens"] <= 1,
              "a stop token that is the greedy first token ends the answer", stopped)
        held = post(base, "/v1/completions", {**stoppable, "max_tokens": 8, "stop_token_ids": [first], "min_tokens": 5})
        ids = held["choices"][0]["token_ids"]
        check(len(ids) >= 5 and first not in ids[:5], "min_tokens 5 bans the stop token for 5 tokens", ids)

        seeded = {**req, "temperature": 1.0, "top_p": 0.9, "seed": 42}
        alone = post(base, "/v1/completions", seeded)["choices"][0]["token_ids"]
        results = [None] * 8

        def other(i):
            results[i] = post(base, "/v1/completions", {**req, "prompt": f"request {i} " * (i + 1), "max_tokens": 24})

        threads = [threading.Thread(target=other, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        beside = post(base, "/v1/completions", seeded)["choices"][0]["token_ids"]
        for t in threads:
            t.join()
        check(all(r is not None for r in results), "8 concurrent requests answered")
        # Informational until batch-invariant kernels exist (issue 17 item 7): other rows change the GEMM shapes.
        check(alone == beside, "seeded sampling gives the same tokens alone and in a batch", f"{alone} vs {beside}",
              required=False)

        # Structured output: the grammar's token bitmask is applied to the logits on the backend's device.
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9}},
                  "required": ["n"]}
        for seed in range(3):
            text = post(base, "/v1/completions", {"model": name, "prompt": "Numbers:", "max_tokens": 200, "seed": seed,
                                                  "temperature": 1.0, "guided_json": schema})["choices"][0]["text"]
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            check(isinstance(value, dict) and isinstance(value.get("n"), int) and 3 <= value["n"] <= 9,
                  f"guided_json output validates (seed {seed})", repr(text))
        text = post(base, "/v1/completions", {"model": name, "prompt": "Answer:", "max_tokens": 20, "seed": 1,
                                              "temperature": 1.0, "regex": "(yes|no|maybe)"})["choices"][0]["text"]
        check(re.fullmatch("(yes|no|maybe)", text) is not None, "regex output fullmatches", repr(text))

        whole = post(base, "/v1/completions", req)["choices"][0]["text"]
        streamed = post(base, "/v1/completions", {**req, "stream": True}, stream=True)
        check(whole == streamed, "streamed text equals the whole answer", f"{whole!r} vs {streamed!r}")
    finally:
        server.kill()


if __name__ == "__main__":
    main()
