#!/usr/bin/env python3
"""How many open streams `radixserve serve` holds (issue 17: 5,000): opens --streams streaming completions at once on
loopback, each on its own connection, and checks that every one is admitted (200 and its SSE head, none refused),
that /health stays fast while they are all open, how many threads and how much memory the server spends on them, that
every stream then completes with all its tokens and [DONE], and that the server's descriptors return to idle.

  tools/stream_capacity.py RADIXSERVE MODEL_DIR [--streams 5000] [--max-tokens 8] [-- serve flags]

Serve flags default to a queue that fits the streams (--max-queued-requests) on the dummy-weight fixture."""
import argparse
import asyncio
import json
import os
import pathlib
import re
import resource
import sys
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from radixserve_server import Server  # noqa: E402


def process_status(pid: int) -> dict:
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return {"threads": int(fields["Threads"]), "rss_kib": int(fields["VmRSS"].split()[0]),
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


async def health_ms(port: int) -> float:
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    await reader.read()
    writer.close()
    return (time.perf_counter() - start) * 1000


class Stream:
    def __init__(self, port: int, body: bytes):
        self.port, self.body = port, body
        self.status, self.tokens, self.done, self.error = 0, 0, False, ""
        self.head = asyncio.Event()
        self.go = asyncio.Event()

    async def run(self) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)
            writer.write((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(self.body)}\r\n\r\n").encode() + self.body)
            await writer.drain()
            status_line = await reader.readline()
            match = re.match(rb"HTTP/1\.1 (\d+)", status_line)
            self.status = int(match.group(1)) if match else -1
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            self.head.set()
            await self.go.wait()  # read nothing more until every stream is open
            while True:
                line = await reader.readline()
                if not line:
                    break
                if line.startswith(b"data: [DONE]"):
                    self.done = True
                    break
                if line.startswith(b"data: "):
                    usage = json.loads(line[6:]).get("usage")
                    if usage:
                        self.tokens = usage["completion_tokens"]
            writer.close()
        except Exception as e:  # noqa: BLE001 - reported per stream
            self.error = repr(e)
            self.head.set()


async def measure(args, port: int, model: str, pid: int) -> dict:
    body = json.dumps({"model": model, "prompt": [1, 2, 3, 4, 5, 6, 7, 8], "max_tokens": args.max_tokens,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}).encode()
    streams = [Stream(port, body) for _ in range(args.streams)]
    start = time.perf_counter()
    tasks = [asyncio.create_task(s.run()) for s in streams]
    await asyncio.gather(*(s.head.wait() for s in streams))
    open_s = time.perf_counter() - start
    held = process_status(pid)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for name in ("running", "waiting"):
        match = re.search(rf"^radixserve_num_requests_{name}\{{[^}}]*\}} (\S+)", metrics, re.M)
        held[f"requests_{name}"] = float(match.group(1)) if match else None
    healths = [await health_ms(port) for _ in range(5)]
    for s in streams:
        s.go.set()
    await asyncio.gather(*tasks)
    total_s = time.perf_counter() - start
    statuses = {}
    for s in streams:
        statuses[s.status] = statuses.get(s.status, 0) + 1
    return {"streams": args.streams, "seconds_until_all_open": round(open_s, 2), "seconds_total": round(total_s, 1),
            "statuses": statuses, "errors": [s.error for s in streams if s.error][:5],
            "completed": sum(s.done and s.tokens == args.max_tokens for s in streams), "server_while_open": held,
            "health_ms_while_open": [round(h, 1) for h in healths]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("radixserve")
    parser.add_argument("model_dir")
    parser.add_argument("--streams", type=int, default=5000)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--health-ms", type=float, default=1000)
    parser.add_argument("--json", help="write the figures here")
    args, serve_flags = parser.parse_known_args()
    serve_flags = [flag for flag in serve_flags if flag != "--"] or [
        "--load-format", "dummy", "--max-queued-requests", str(args.streams + 64)]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        server = Server(args.radixserve, args.model_dir, serve_flags, threads=None, startup_s=300)
    except RuntimeError as error:
        print(f"FAIL: {error}")
        return 1
    port = server.port
    try:
        url = server.url
        model = json.loads(urllib.request.urlopen(url + "/v1/models", timeout=10).read())["data"][0]["id"]
        idle = process_status(server.pid)
        figures = asyncio.run(measure(args, port, model, server.pid))
        time.sleep(0.5)
        figures["server_idle_before"] = idle
        figures["server_after"] = process_status(server.pid)
        print(json.dumps(figures, indent=1))
        if args.json:
            with open(args.json, "w") as out:
                json.dump(figures, out, indent=1)
        problems = []
        if figures["statuses"] != {200: args.streams}:
            problems.append(f"statuses {figures['statuses']}, errors {figures['errors']}")
        if figures["completed"] != args.streams:
            problems.append(f"{figures['completed']} of {args.streams} streams completed with all their tokens")
        if max(figures["health_ms_while_open"]) > args.health_ms:
            problems.append(f"/health took {max(figures['health_ms_while_open'])} ms with every stream open")
        if figures["server_after"]["fds"] > idle["fds"]:
            problems.append(f"descriptors: {idle['fds']} at idle, {figures['server_after']['fds']} after")
        for problem in problems:
            print("FAIL:", problem)
        return 1 if problems else 0
    finally:
        server.kill()


if __name__ == "__main__":
    sys.exit(main())
