#!/usr/bin/python3
"""deploy/ against the real server: every radixserve container in the Kubernetes manifests is started here with its
own arguments (the model swapped for a tiny fixture, the GPU for the CPU, the EPP's address for a local socket), and
its probe paths, scrape path and KV events must answer as the orchestrator and llm-d's endpoint picker expect; the
llm-d replica's page size, hash seed and topic must agree with the picker's config; the container images must install
every shared library the binary links; the Prometheus scrape job's relabelling must pass `promtool check config`.

usage: deploy_test.py RADIXSERVE MODEL_DIR PROMTOOL   (Debian's /usr/bin/python3: yaml, zmq, msgpack, cbor2)"""
import hashlib
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import cbor2
import msgpack
import yaml
import zmq

from radixserve_server import Server
from test_checks import check, fail

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def documents(path: pathlib.Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def radixserve_containers() -> list:
    """(file, container, pod labels) for every Deployment container whose args start with `serve`."""
    found = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for doc in documents(path):
            if doc.get("kind") != "Deployment":
                continue
            pod = doc["spec"]["template"]
            for container in pod["spec"]["containers"]:
                if container.get("args", [None])[0] == "serve":
                    found.append((path, container, pod["metadata"].get("labels", {})))
    return found


def local_args(args: list, env: dict, kv_endpoint: str) -> list:
    """The container's serve flags for a local run: no positional model, host, port or GPU backend; $(VAR) expanded
    as Kubernetes does; the KV events endpoint pointed at kv_endpoint."""
    out, skip = [], 0
    for i, arg in enumerate(args[2:]):  # "serve", the model
        if skip:
            skip -= 1
            continue
        if arg in ("--host", "--port", "--backend"):
            skip = 1
            continue
        arg = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg)
        if out and out[-1] == "--kv-events-config":
            config = json.loads(arg)
            config["endpoint"] = kv_endpoint
            arg = json.dumps(config)
        out.append(arg)
    return out


def get(url: str) -> tuple:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_container(binary: str, model: str, path, container: dict, labels: dict, epp: dict) -> str:
    env = {e["name"]: e.get("value", "127.0.0.1") for e in container.get("env", [])}  # fieldRefs: this host
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    port = sub.bind_to_random_port("tcp://127.0.0.1")  # the EPP binds; replicas connect
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    args = local_args(container["args"], env, f"tcp://127.0.0.1:{port}")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        server = Server(binary, model, ["--load-format", "dummy", "--context-length", "512", *args])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    check(ports.get("http") == int(container["args"][container["args"].index("--port") + 1]),
          f"{path.name}: the http port is not the one --port serves")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        spec = container.get(probe)
        check(spec is not None, f"{path.name}: no {probe}")
        status, _ = get(server.url + spec["httpGet"]["path"])
        check(status == 200, f"{path.name}: {probe} {spec['httpGet']['path']} answered {status} on a ready server")
    status, metrics = get(server.url + "/metrics")
    for name in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
        check(re.search(rf"^{re.escape(name)}[{{ ]", metrics, re.M), f"/metrics lacks {name}, which the EPP reads")

    summary = f"{path.name}: probes and /metrics answer"
    if "--kv-events-config" in args:
        config = json.loads(args[args.index("--kv-events-config") + 1])
        page = int(args[args.index("--page-size") + 1])
        seed = env.get("PYTHONHASHSEED")
        scorer = epp["precise-prefix-cache-scorer"]
        check(page == scorer["tokenProcessorConfig"]["blockSize"], f"{path.name}: --page-size {page} != the EPP's "
              f"blockSize {scorer['tokenProcessorConfig']['blockSize']}")
        check(seed == scorer["tokenProcessorConfig"]["hashSeed"], f"{path.name}: PYTHONHASHSEED {seed} != hashSeed")
        check(config["topic"].startswith(scorer["kvEventsConfig"]["topicFilter"]), "topic outside the EPP's filter")
        # A bound SUB sends its subscription to a connecting PUB only while it processes its socket's commands (as
        # the EPP's receive loop does): poll for a while before the first event.
        for _ in range(10):
            sub.poll(50)
        prompt = [(7 * t) % 500 + 1 for t in range(2 * page + 5)]
        body = json.dumps({"prompt": prompt, "max_tokens": 1}).encode()
        urllib.request.urlopen(urllib.request.Request(server.url + "/v1/completions", data=body,
                                                      headers={"Content-Type": "application/json"}), timeout=60)
        check(sub.poll(5000), f"{path.name}: no KV event reached the picker's socket")
        topic, seq, payload = sub.recv_multipart()
        check(topic.decode() == f"kv@127.0.0.1@{config['topic'].split('@', 2)[2]}", f"topic {topic!r}")
        stored = msgpack.unpackb(payload, raw=False)[1][0]
        check(stored[0] == "BlockStored" and stored[4] == page and stored[3] == prompt[:2 * page],
              f"expected the prompt's two whole pages stored: {stored!r:.200}")
        digest = hashlib.sha256(cbor2.dumps(seed, canonical=True)).digest()
        for i, h in enumerate(stored[1]):
            digest = hashlib.sha256(cbor2.dumps((digest, tuple(prompt[i * page:(i + 1) * page]), None),
                                                canonical=True)).digest()
            check(h == int.from_bytes(digest, "big") & (2**64 - 1), f"block {i}: the EPP would hash it otherwise")
        summary += f", KV events on topic {topic.decode()} hash as the EPP does (block {page}, seed {seed})"
    server.stop()
    sub.close(linger=0)
    context.term()
    return summary


def epp_plugins() -> dict:
    values = documents(DEPLOY / "llm-d" / "epp-values.yaml")[0]
    extension = values["inferenceExtension"]
    config = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    check(config["kind"] == "EndpointPickerConfig", "the EPP plugins config is not an EndpointPickerConfig")
    pool = values["inferencePool"]
    selector = pool["modelServers"]["matchLabels"]
    pods = [labels for _, _, labels in radixserve_containers()]
    check(any(all(labels.get(k) == v for k, v in selector.items()) for labels in pods),
          f"the InferencePool selects {selector}, which no radixserve pod carries")
    check(pool["modelServerType"] == "vllm", "the EPP must read radixserve's load under vLLM's metric names")
    return {p["type"]: p.get("parameters", {}) for p in config["plugins"]}


def needed_packages(binary: str) -> set:
    """Debian packages owning the libraries the binary names in NEEDED (CUDA's own come from NVIDIA's packages)."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                        subprocess.run(["readelf", "-d", binary], capture_output=True, text=True).stdout)
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", binary], capture_output=True,
                                                                    text=True).stdout, re.M))
    packages = set()
    for lib in needed:
        if re.match(r"lib(a|ub|t|l|hwa)san\.", lib):
            continue  # a sanitizer build's runtime (scripts/test-asan), not what an image's Release build links
        path = paths.get(lib)
        check(path is not None, f"ldd cannot find {lib}")
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
        if owner.returncode != 0:
            owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
        if owner.returncode == 0:
            packages.add(owner.stdout.split(":")[0])
        else:
            packages.add(lib)  # not from Debian (the CUDA toolkit): named by library
    return packages


def check_images(binary: str) -> str:
    packages = needed_packages(binary)
    for name in ("Dockerfile.cpu", "Dockerfile.cuda"):
        text = (DEPLOY / "docker" / name).read_text()
        runtime = text[text.index("AS runtime"):]
        installed = set(re.findall(r"[a-z0-9][a-z0-9.+-]+", runtime))
        for package in packages:
            if package.startswith("libcudart") or package.startswith("libcublas"):
                want = "cuda-cudart-13-0" if package.startswith("libcudart") else "libcublas-13-0"
                if name == "Dockerfile.cuda":
                    check(want in installed, f"{name}: the runtime lacks {want} for {package}")
                continue
            if package == "libc6":
                continue
            check(package in installed, f"{name}: the runtime image does not install {package}, which radixserve "
                  f"links")
        for script in re.findall(r"scripts/\w[\w-]*", text):
            check((ROOT / script).exists(), f"{name} runs {script}, which does not exist")
    return f"images install the {len(packages)} packages radixserve links"


def check_scrape_config(promtool: str) -> str:
    config = yaml.safe_load((DEPLOY / "kubernetes" / "prometheus-scrape.yaml").read_text())
    # Debian's promtool is built without Kubernetes discovery: check the job with static targets instead.
    for job in config["scrape_configs"]:
        job.pop("kubernetes_sd_configs")
        job["static_configs"] = [{"targets": ["127.0.0.1:8000"]}]
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        yaml.safe_dump(config, f)
        f.flush()
        result = subprocess.run([promtool, "check", "config", f.name], capture_output=True, text=True)
    check(result.returncode == 0, f"promtool check config: {result.stdout}{result.stderr}")
    return "the scrape job's relabelling passes promtool"


def main() -> None:
    binary, model, promtool = sys.argv[1], sys.argv[2], sys.argv[3]
    containers = radixserve_containers()
    check(len(containers) >= 2, f"expected the Kubernetes and llm-d Deployments, found {len(containers)}")
    epp = epp_plugins()
    for path, container, labels in containers:
        print(check_container(binary, model, path, container, labels, epp))
    print(check_images(binary))
    print(check_scrape_config(promtool))


if __name__ == "__main__":
    main()
