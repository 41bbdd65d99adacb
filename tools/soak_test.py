#!/usr/bin/env python3
"""Soak test of `radixserve serve` (issue 17 item 4): many concurrent clients on loopback, most of them well-behaved
streaming or non-streaming completions, the rest misbehaving: disconnects before the headers are complete, in the
middle of the body upload and in the middle of the stream, malformed and oversized bodies, and slow readers.

Afterwards it checks that the server lost nothing and leaks nothing:
  - every well-formed request completed (200, its tokens, a finish reason) or was aborted by its own client;
  - no 5xx at all, and 503 only if --allow-503 (a run past --max-queued-requests);
  - bad bodies got 4xx; /metrics counts every call as ok, aborted or a client error;
  - running and waiting back to 0, KV pages held only by the prefix cache and 0 after /flush_cache, state slots 0;
  - the server's RSS within --rss-tolerance of its level after a warm-up pass of the same load, its open file
    descriptors back to their idle count;
  - /health answered within --health-ms throughout (polled every 100 ms).

  tools/soak_test.py RADIXSERVE MODEL_DIR [--clients 1000] [--requests 10000] [serve flags after --]

A CTest (soak_small) runs it with 64 clients and 600 requests on the tiny-chat fixture."""
import argparse
import asyncio
import json
import os
import pathlib
import random
import re
import sys
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from radixserve_server import Server  # noqa: E402

KINDS = [  # (kind, weight)
    ("stream", 40), ("plain", 12), ("drop_stream", 12), ("drop_headers", 6), ("drop_body", 6), ("invalid", 6),
    ("oversized", 3), ("slow", 8), ("drop_nonstream", 7)]


class Soak:
    def __init__(self, args, port: int, model: str):
        self.args, self.port, self.model = args, port, model
        self.rng = random.Random(args.seed)
        self.counts = {kind: 0 for kind, _ in KINDS}
        self.failures = []
        self.num_failures = 0
        self.statuses = {}
        self.completed = 0
        self.tokens = 0

    def fail(self, message: str) -> None:
        self.num_failures += 1
        if len(self.failures) < 20:
            self.failures.append(message)

    def body(self, stream: bool, max_tokens: int) -> bytes:
        prompt = [self.rng.randrange(1, 500) for _ in range(self.rng.randrange(4, 96))]
        return json.dumps({"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.7,
                           "seed": self.rng.randrange(1 << 30), "ignore_eos": True, "stream": stream}).encode()

    @staticmethod
    def head(body: bytes) -> bytes:
        return (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()

    async def open(self):
        return await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)

    async def read_status(self, reader) -> tuple:
        line = await reader.readline()
        match = re.match(rb"HTTP/1\.1 (\d+)", line)
        if not match:
            raise ConnectionError(f"bad status line {line[:80]!r}")
        headers = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        status = int(match.group(1))
        self.statuses[status] = self.statuses.get(status, 0) + 1
        return status, headers

    async def read_body(self, reader, headers) -> bytes:
        if "content-length" in headers:
            return await reader.readexactly(int(headers["content-length"]))
        return await reader.read()

    async def one(self, kind: str) -> None:
        self.counts[kind] += 1
        reader, writer = await self.open()
        try:
            if kind == "drop_headers":
                writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
                await writer.drain()
                await asyncio.sleep(self.rng.random() * 0.05)
                return
            if kind == "drop_body":
                body = self.body(False, 16)
                writer.write(self.head(body) + body[: len(body) // 2])
                await writer.drain()
                await asyncio.sleep(self.rng.random() * 0.05)
                return
            if kind in ("invalid", "oversized"):
                body = b'{"model": "x", "prompt": [1, 2' if kind == "invalid" else b"[" + b"1," * (self.args.max_body // 2) + b"1]"
                writer.write(self.head(body) + body)
                await writer.drain()
                status, headers = await self.read_status(reader)
                if not 400 <= status < 500:
                    self.fail(f"{kind} body answered {status}")
                return
            stream = kind in ("stream", "drop_stream", "slow")
            max_tokens = self.rng.randrange(4, 64) if kind != "drop_stream" else 2000
            body = self.body(stream, max_tokens)
            writer.write(self.head(body) + body)
            await writer.drain()
            if kind == "drop_nonstream":  # leave before the answer
                await asyncio.sleep(self.rng.random() * 0.2)
                return
            status, headers = await self.read_status(reader)
            if status == 503 and self.args.allow_503:
                return
            if status != 200:
                self.fail(f"{kind}: status {status}: {(await self.read_body(reader, headers))[:200]!r}")
                return
            if not stream:
                reply = json.loads(await self.read_body(reader, headers))
                tokens = reply["usage"]["completion_tokens"]
                if tokens != max_tokens or not reply["choices"][0].get("finish_reason"):
                    self.fail(f"plain: {tokens} of {max_tokens} tokens, finish {reply['choices'][0].get('finish_reason')}")
                self.completed += 1
                self.tokens += tokens
                return
            chunks, finish, leave_after = 0, None, self.rng.randrange(1, 6)
            while True:
                if kind == "slow":
                    await asyncio.sleep(0.02)
                line = await reader.readline()
                if not line:
                    break
                if not line.startswith(b"data: "):
                    continue
                if line.strip() == b"data: [DONE]":
                    break
                event = json.loads(line[6:])
                for choice in event.get("choices", []):
                    finish = choice.get("finish_reason") or finish
                chunks += 1
                if kind == "drop_stream" and chunks >= leave_after:
                    return
            if kind == "drop_stream":
                return  # the server finished first (a loaded machine); counted as ok by /metrics
            if finish is None:
                self.fail(f"{kind}: stream ended without a finish reason after {chunks} chunks")
            else:
                self.completed += 1
        except (ConnectionError, asyncio.IncompleteReadError, json.JSONDecodeError) as error:
            if kind not in ("drop_headers", "drop_body", "drop_stream", "drop_nonstream", "oversized"):
                self.fail(f"{kind}: {type(error).__name__}: {error}")
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def run(self, requests: int) -> float:
        kinds = [kind for kind, weight in KINDS for _ in range(weight)]
        plan = [self.rng.choice(kinds) for _ in range(requests)]
        next_index = 0

        async def client():
            nonlocal next_index
            while next_index < len(plan):
                kind = plan[next_index]
                next_index += 1
                try:
                    await asyncio.wait_for(self.one(kind), timeout=self.args.request_timeout)
                except asyncio.TimeoutError:
                    self.fail(f"{kind}: no answer within {self.args.request_timeout} s")

        start = time.time()
        await asyncio.gather(*(client() for _ in range(self.args.clients)))
        return time.time() - start


def metrics(url: str) -> dict:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            key = re.sub(r'model_name="[^"]*",?', "", name).replace("{}", "")
            values[key] = values.get(key, 0.0) + float(value)
    return values


def grouped(values: dict, name: str) -> float:
    return sum(v for k, v in values.items() if k == name or k.startswith(name + "{"))


def process_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def watch_health(url: str, stop: asyncio.Event, worst: list) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        start = time.time()
        try:
            await loop.run_in_executor(None, lambda: urllib.request.urlopen(url + "/health", timeout=10).read())
        except OSError as error:
            worst.append(f"/health failed: {error}")
        worst[0] = max(worst[0], (time.time() - start) * 1000)
        await asyncio.sleep(0.1)


async def soak_pass(args, port, model, url, requests) -> tuple:
    soak = Soak(args, port, model)
    stop = asyncio.Event()
    health = [0.0]
    watcher = asyncio.create_task(watch_health(url, stop, health))
    seconds = await soak.run(requests)
    stop.set()
    await watcher
    return soak, seconds, health


def wait_idle(url: str) -> dict:
    for _ in range(400):
        values = metrics(url)
        if values.get("radixserve_num_requests_running", 1) == 0 and values.get("radixserve_num_requests_waiting", 1) == 0:
            return values
        time.sleep(0.05)
    raise SystemExit(f"FAIL: the server never became idle: {values.get('radixserve_num_requests_running')} running, "
                     f"{values.get('radixserve_num_requests_waiting')} waiting")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("radixserve")
    parser.add_argument("model_dir")
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--warmup", type=int, default=0, help="requests of the warm-up pass (default: a quarter)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-body", type=int, default=1 << 20, help="the server's --max-request-bytes")
    parser.add_argument("--request-timeout", type=float, default=300)
    parser.add_argument("--health-ms", type=float, default=1000)
    parser.add_argument("--rss-tolerance", type=float, default=0.05)
    parser.add_argument("--allow-503", action="store_true")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--server-log", default=os.devnull, help="write the server's log here")
    args, serve_flags = parser.parse_known_args()
    serve_flags = [flag for flag in serve_flags if flag != "--"]
    try:
        server = Server(args.radixserve, args.model_dir, ["--max-request-bytes", str(args.max_body), *serve_flags],
                        threads=None, log_path=None if args.server_log == os.devnull else args.server_log,
                        startup_s=300)
    except RuntimeError as error:
        print(f"FAIL: {error}")
        return 1
    url = server.url
    port = server.port
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=10) as response:
            model = json.loads(response.read())["data"][0]["id"]
        idle_fds = open_fds(server.pid)
        warmup = args.warmup or max(args.clients, args.requests // 4)
        asyncio.run(soak_pass(args, port, model, url, warmup))
        wait_idle(url)
        rss_warm = process_rss_kib(server.pid)
        before = metrics(url)
        soak, seconds, health = asyncio.run(soak_pass(args, port, model, url, args.requests))
        after = wait_idle(url)
        rss_end = process_rss_kib(server.pid)
        time.sleep(0.5)  # sockets of the last clients close
        fds_end = open_fds(server.pid)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        ok, aborted = delta.get('radixserve_requests_total{outcome="ok"}', 0), delta.get(
            'radixserve_requests_total{outcome="aborted"}', 0)
        client_errors = grouped(delta, "radixserve_client_errors_total")
        problems = list(soak.failures) + [h for h in health[1:]]
        if soak.num_failures > len(soak.failures):
            problems.append(f"... {soak.num_failures} failed requests in all")
        server_errors = sum(count for status, count in soak.statuses.items() if status >= 500 and status != 503)
        if server_errors:
            problems.append(f"{server_errors} answers with 5xx: {soak.statuses}")
        if soak.statuses.get(503) and not args.allow_503:
            problems.append(f"{soak.statuses[503]} answers 503 (queue full) with {args.clients} clients")
        used, cached = grouped(after, "radixserve_kv_pages_used"), grouped(after, "radixserve_kv_pages_cached")
        if used != cached:
            problems.append(f"{used - cached:.0f} KV pages held by no request")
        if after.get("radixserve_state_slots_used", 0) != after.get("radixserve_state_snapshots", 0):
            problems.append("state slots held by no request")
        req = urllib.request.Request(url + "/flush_cache", data=b"{}", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).read()
        time.sleep(0.1)
        if grouped(metrics(url), "radixserve_kv_pages_used") != 0:
            problems.append("KV pages still used after /flush_cache")
        if rss_end > rss_warm * (1 + args.rss_tolerance):
            problems.append(f"RSS grew from {rss_warm} KiB after warm-up to {rss_end} KiB")
        if fds_end > idle_fds:
            problems.append(f"{fds_end - idle_fds} file descriptors more than at idle ({idle_fds})")
        if health[0] > args.health_ms:
            problems.append(f"/health took {health[0]:.0f} ms at worst")
        calls = ok + aborted + client_errors
        figures = {"clients": args.clients, "requests": args.requests, "seconds": round(seconds, 1),
                   "kinds": soak.counts, "statuses": {str(k): v for k, v in sorted(soak.statuses.items())},
                   "completed_checked": soak.completed, "failed": soak.num_failures, "metrics_ok": ok, "metrics_aborted": aborted,
                   "metrics_client_errors": client_errors, "rss_warm_kib": rss_warm, "rss_end_kib": rss_end,
                   "fds_idle": idle_fds, "fds_end": fds_end, "health_worst_ms": round(health[0], 1)}
        print(json.dumps(figures, indent=1))
        if args.json:
            with open(args.json, "w") as out:
                json.dump(figures, out, indent=1)
        # Every call the server saw ends as ok, aborted or a 4xx. Uploads cut short end (as 4xx) only at the server's
        # read timeout, so some of the warm-up's may land in this pass's counts.
        if calls > args.requests + warmup:
            problems.append(f"/metrics counts {calls:.0f} calls for {args.requests} requests")
        if problems:
            print("FAIL:\n  " + "\n  ".join(problems))
            return 1
        print(f"soak: ok ({args.requests} requests from {args.clients} clients in {seconds:.1f} s)")
        return 0
    finally:
        server.kill()


if __name__ == "__main__":
    sys.exit(main())
