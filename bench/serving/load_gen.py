#!/usr/bin/env python3
"""Serving load generator: drives a running radixserve (or any OpenAI-compatible server) with streamed completions at
fixed concurrency levels and prints one JSON object: per level, output tokens/s, request rate, time to first token,
inter-token latency and end-to-end latency. Prompts are random token ids (no prefix-cache hits); outputs run to
max_tokens (ignore_eos). Standard library only, so it runs wherever python3 does.

  python3 bench/serving/load_gen.py --base-url http://127.0.0.1:8000 --concurrency 1,8,32 --waves 4 \\
      --prompt-tokens 128 --max-tokens 64 --vocab 151000
"""
import argparse
import http.client
import json
import os
import random
import threading
import time
import urllib.parse


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]


def summary(values):
    values = sorted(v for v in values if v is not None)
    mean = sum(values) / len(values) if values else None
    return {"mean": mean, "p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99)}


class Client:
    def __init__(self, base_url, api_key):
        url = urllib.parse.urlparse(base_url)
        self.host, self.port = url.hostname, url.port or 80
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def get_json(self, path):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        conn.request("GET", path, headers=self.headers)
        return json.loads(conn.getresponse().read())

    def stream_completion(self, model, prompt, max_tokens):
        """One streamed request: {ttft, itls, tokens, latency} in seconds."""
        body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                           "ignore_eos": True, "stream": True, "return_token_ids": True})
        start = time.perf_counter()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        conn.request("POST", "/v1/completions", body=body, headers=self.headers)
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.read()[:500]!r}")
        ttft, last, tokens, itls = None, start, 0, []
        for line in response:  # SSE: "data: {...}" lines separated by blank lines
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            count = sum(len(c.get("token_ids") or []) for c in chunk.get("choices", []))
            if count == 0:
                continue
            now = time.perf_counter()
            if ttft is None:
                ttft = now - start
            else:
                itls.append((now - last) / count)
            last = now
            tokens += count
        conn.close()
        return {"ttft": ttft, "itls": itls, "tokens": tokens, "latency": time.perf_counter() - start}


def run_level(client, model, concurrency, total, args, rng):
    prompts = [[rng.randrange(1, args.vocab) for _ in range(args.prompt_tokens)] for _ in range(total)]
    results, lock = [], threading.Lock()

    def worker():
        while True:
            with lock:
                if not prompts:
                    return
                prompt = prompts.pop()
            result = client.stream_completion(model, prompt, args.max_tokens)
            with lock:
                results.append(result)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    output_tokens = sum(r["tokens"] for r in results)
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "duration_s": seconds,
        "output_tokens": output_tokens,
        "output_tokens_per_s": output_tokens / seconds,
        "requests_per_s": len(results) / seconds,
        "ttft_s": summary([r["ttft"] for r in results]),
        "itl_s": summary([itl for r in results for itl in r["itls"]]),
        "e2e_latency_s": summary([r["latency"] for r in results]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated concurrency levels")
    parser.add_argument("--waves", type=int, default=4, help="requests per level = waves x concurrency")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=32000, help="prompt token ids are drawn below this")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    client = Client(args.base_url, args.api_key)
    model = client.get_json("/v1/models")["data"][0]["id"]
    rng = random.Random(args.seed)
    levels = []
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        level = run_level(client, model, concurrency, args.waves * concurrency, args, rng)
        levels.append(level)
        print(f"concurrency {concurrency}: {level['output_tokens_per_s']:.1f} output tok/s, "
              f"TTFT p50 {level['ttft_s']['p50'] * 1000:.0f} ms", file=__import__("sys").stderr)
    print(json.dumps({"base_url": args.base_url, "model": model, "prompt_tokens": args.prompt_tokens,
                      "max_tokens": args.max_tokens, "host_cpus": os.cpu_count(), "levels": levels}, indent=2))


if __name__ == "__main__":
    main()
