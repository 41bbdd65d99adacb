#!/usr/bin/env python3
"""/metrics passes `promtool check metrics` (the text format parses, and Prometheus' lint rules hold) but for one
finding it must keep: the vLLM and SGLang metric names routers read contain ':' (promtool reserves colons for
recording rules; vLLM's and SGLang's own servers export the same names)."""
import json
import re
import subprocess
import sys
import urllib.request

from radixserve_server import Server
from test_checks import check


def main() -> None:
    binary, promtool, model = sys.argv[1], sys.argv[2], sys.argv[3]
    kv_events = "--kv-events" in sys.argv[4:]  # the build has KV cache events: lint their counters too
    check(subprocess.run([promtool, "--version"], capture_output=True).returncode == 0,
          f"no promtool at {promtool}: run scripts/setup")
    extra = ["--kv-events-config", json.dumps({"enable_kv_cache_events": True, "endpoint": "tcp://127.0.0.1:*"})]
    server = Server(binary, model, ["--load-format", "dummy", *(extra if kv_events else [])])
    body = json.dumps({"prompt": "hello", "max_tokens": 2}).encode()
    request = urllib.request.Request(server.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()
    text = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    server.stop()
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    findings = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    router_name = re.compile(r"^(vllm|sglang):[a-z_]+ metric names should not contain ':'$")
    other = [line for line in findings if not router_name.match(line)]
    check(result.returncode in (0, 3) and not other,
          f"promtool check metrics (exit {result.returncode}):\n" + "\n".join(other or findings))
    check(any(line.startswith("vllm:num_requests_running ") for line in findings),
          "the router names were not linted: is /metrics missing them?")
    check(not kv_events or "radixserve_kv_events_published_total" in text, "no KV event counters in /metrics")
    print(f"promtool check metrics: {len(findings)} findings, all router names with ':'")


if __name__ == "__main__":
    main()
