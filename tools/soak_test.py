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

A CTest (soak_small) runs it with 64 clients and 600 requests on the tiny-chat fixture.

The GPU soak (issue 42 item 5): a fixed time instead of a request count, longer prompts and outputs, only streams of
which a third leave mid-stream, and a time series of host RSS, device memory (nvidia-smi), running requests and KV
pages, drawn as a PNG:

  tools/soak_test.py build/bin/radixserve configs/Qwen3-8B --duration 300 --clients 256 --mix disconnects \
      --prompt-tokens 64-1024 --max-tokens 32-512 --series soak.csv --plot soak.png -- --load-format dummy \
      --backend cuda --max-running-requests 256"""
import argparse
import asyncio
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from radixserve_server import Server  # noqa: E402

MIXES = {  # name: [(kind, weight)]
    "default": [("stream", 40), ("plain", 12), ("drop_stream", 12), ("drop_headers", 6), ("drop_body", 6),
                ("invalid", 6), ("oversized", 3), ("slow", 8), ("drop_nonstream", 7)],
    # Streams only, a third of them left mid-stream by their client (issue 42's GPU soak).
    "disconnects": [("stream", 2), ("drop_stream", 1)],
}


def token_range(text: str) -> tuple:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


class Soak:
    def __init__(self, args, port: int, model: str):
        self.args, self.port, self.model = args, port, model
        self.rng = random.Random(args.seed)
        self.kinds = MIXES[args.mix]
        self.counts = {kind: 0 for kind, _ in self.kinds}
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
        low, high = token_range(self.args.prompt_tokens)
        prompt = [self.rng.randrange(1, 500) for _ in range(self.rng.randint(low, high))]
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
            max_tokens = self.rng.randint(*token_range(self.args.max_tokens))
            # The default mix leaves long streams after a few chunks; the disconnects mix anywhere in the first half.
            leave_after = self.rng.randrange(1, 6) if self.args.mix == "default" else self.rng.randint(1, max(1, max_tokens // 2))
            if kind == "drop_stream" and self.args.mix == "default":
                max_tokens = 2000
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
            chunks, finish = 0, None
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
                self.tokens += 1
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

    async def run(self, requests: int, duration: float = 0) -> float:
        """`requests` requests in all, or with `duration` as many as the clients start in that many seconds."""
        kinds = [kind for kind, weight in self.kinds for _ in range(weight)]
        plan = [self.rng.choice(kinds) for _ in range(requests)]
        next_index = 0
        deadline = time.time() + duration

        async def client():
            nonlocal next_index
            while time.time() < deadline if duration else next_index < len(plan):
                kind = self.rng.choice(kinds) if duration else plan[next_index]
                next_index += 1
                try:
                    await asyncio.wait_for(self.one(kind), timeout=self.args.request_timeout)
                except asyncio.TimeoutError:
                    self.fail(f"{kind}: no answer within {self.args.request_timeout} s")

        start = time.time()
        await asyncio.gather(*(client() for _ in range(self.args.clients)))
        self.requests = next_index
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


def device_memory_mib(pid: int):
    """The server's device memory in MiB (nvidia-smi's per-process figure, else the whole GPU's when the container
    hides other PIDs), or None without nvidia-smi."""
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10).stdout
        for line in apps.splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) == 2 and fields[0] == str(pid):
                return float(fields[1])
        used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10).stdout.split()
        return float(used[0]) if used else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


SERIES = ["seconds", "rss_mib", "device_mib", "running", "waiting", "kv_pages_used", "kv_pages_cached", "tokens"]


async def sample_series(url: str, pid: int, soak, stop: asyncio.Event, every: float, rows: list) -> None:
    """Every `every` seconds: host RSS, device memory, running and waiting requests, KV pages, tokens streamed."""
    loop = asyncio.get_running_loop()
    start = time.time()
    while not stop.is_set():
        values = await loop.run_in_executor(None, metrics, url)
        device = await loop.run_in_executor(None, device_memory_mib, pid)
        rows.append([round(time.time() - start, 1), round(process_rss_kib(pid) / 1024, 1), device,
                     values.get("radixserve_num_requests_running", 0), values.get("radixserve_num_requests_waiting", 0),
                     grouped(values, "radixserve_kv_pages_used"), grouped(values, "radixserve_kv_pages_cached"),
                     soak.tokens])
        try:
            await asyncio.wait_for(stop.wait(), timeout=every)
        except asyncio.TimeoutError:
            pass


def plot_series(rows: list, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [r[0] for r in rows]
    figure, (memory, load, rate) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    memory.plot(t, [r[1] for r in rows], label="host RSS (MiB)")
    if any(r[2] is not None for r in rows):
        memory.plot(t, [r[2] for r in rows], label="device memory (MiB)")
    memory.set_ylim(bottom=0)
    memory.legend()
    load.plot(t, [r[3] for r in rows], label="running")
    load.plot(t, [r[4] for r in rows], label="waiting")
    pages = load.twinx()
    pages.plot(t, [r[5] for r in rows], color="tab:red", label="KV pages used")
    pages.plot(t, [r[5] - r[6] for r in rows], color="tab:purple", label="held by requests (not cache)")
    pages.set_ylabel("KV pages")
    load.legend(loc="upper left")
    pages.legend(loc="upper right")
    rate.plot(t[1:], [(b[7] - a[7]) / max(b[0] - a[0], 1e-9) for a, b in zip(rows, rows[1:])], label="streamed tok/s")
    rate.set_xlabel("seconds")
    rate.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


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


async def soak_pass(args, port, model, url, requests, duration=0, pid=None, rows=None) -> tuple:
    soak = Soak(args, port, model)
    stop = asyncio.Event()
    health = [0.0]
    watcher = asyncio.create_task(watch_health(url, stop, health))
    sampler = asyncio.create_task(sample_series(url, pid, soak, stop, args.sample_s, rows)) if rows is not None else None
    seconds = await soak.run(requests, duration)
    stop.set()
    await watcher
    if sampler:
        await sampler
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
    parser.add_argument("--duration", type=float, default=0, help="seconds of the measured pass (replaces --requests)")
    parser.add_argument("--mix", choices=sorted(MIXES), default="default", help="the kinds of clients")
    parser.add_argument("--prompt-tokens", default="4-96", help="prompt length range LOW-HIGH")
    parser.add_argument("--max-tokens", default="4-64", help="max_tokens range LOW-HIGH")
    parser.add_argument("--series", help="write the time series (CSV) here")
    parser.add_argument("--plot", help="draw the time series here (PNG, matplotlib)")
    parser.add_argument("--sample-s", type=float, default=5, help="seconds between series samples")
    parser.add_argument("--device-tolerance-mib", type=float, default=256,
                        help="device memory may end at most this far above its level after the warm-up")
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
        warmup = args.warmup or (args.clients if args.duration else max(args.clients, args.requests // 4))
        asyncio.run(soak_pass(args, port, model, url, warmup))
        wait_idle(url)
        rss_warm = process_rss_kib(server.pid)
        device_warm = device_memory_mib(server.pid)
        before = metrics(url)
        rows = [] if (args.series or args.plot) else None
        soak, seconds, health = asyncio.run(
            soak_pass(args, port, model, url, args.requests, args.duration, server.pid, rows))
        requests = soak.requests
        after = wait_idle(url)
        rss_end = process_rss_kib(server.pid)
        device_end = device_memory_mib(server.pid)
        if rows is not None:
            rows.append([round(seconds, 1), round(rss_end / 1024, 1), device_end, 0, 0,
                         grouped(after, "radixserve_kv_pages_used"), grouped(after, "radixserve_kv_pages_cached"),
                         soak.tokens])
            if args.series:
                with open(args.series, "w") as out:
                    out.write(",".join(SERIES) + "\n")
                    out.writelines(",".join("" if v is None else str(v) for v in row) + "\n" for row in rows)
            if args.plot:
                try:
                    plot_series(rows, args.plot, f"soak: {model}, {args.clients} clients ({args.mix})")
                except ImportError as error:  # the series is in --series; draw it elsewhere
                    print(f"no plot: {error}")
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
        if device_warm is not None and device_end is not None and device_end > device_warm + args.device_tolerance_mib:
            problems.append(f"device memory grew from {device_warm:.0f} MiB after warm-up to {device_end:.0f} MiB")
        if health[0] > args.health_ms:
            problems.append(f"/health took {health[0]:.0f} ms at worst")
        calls = ok + aborted + client_errors
        figures = {"clients": args.clients, "requests": requests, "seconds": round(seconds, 1),
                   "kinds": soak.counts, "statuses": {str(k): v for k, v in sorted(soak.statuses.items())},
                   "completed_checked": soak.completed, "failed": soak.num_failures, "metrics_ok": ok, "metrics_aborted": aborted,
                   "metrics_client_errors": client_errors, "rss_warm_kib": rss_warm, "rss_end_kib": rss_end,
                   "fds_idle": idle_fds, "fds_end": fds_end, "health_worst_ms": round(health[0], 1),
                   "device_warm_mib": device_warm, "device_end_mib": device_end, "streamed_tokens": soak.tokens}
        if rows:
            figures["rss_mib_min_max"] = [min(r[1] for r in rows), max(r[1] for r in rows)]
            device = [r[2] for r in rows if r[2] is not None]
            if device:
                figures["device_mib_min_max"] = [min(device), max(device)]
        print(json.dumps(figures, indent=1))
        if args.json:
            with open(args.json, "w") as out:
                json.dump(figures, out, indent=1)
        # Every call the server saw ends as ok, aborted or a 4xx. Uploads cut short end (as 4xx) only at the server's
        # read timeout, so some of the warm-up's may land in this pass's counts.
        if calls > requests + warmup:
            problems.append(f"/metrics counts {calls:.0f} calls for {requests} requests")
        if problems:
            print("FAIL:\n  " + "\n  ".join(problems))
            return 1
        print(f"soak: ok ({requests} requests from {args.clients} clients in {seconds:.1f} s)")
        return 0
    finally:
        server.kill()


if __name__ == "__main__":
    sys.exit(main())
