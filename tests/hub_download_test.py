#!/usr/bin/env python3
"""`serve ORG/NAME` downloads from a local server that speaks the Hugging Face Hub's file API (the model API's sha and
siblings, resolve/ with ETags, LFS files redirected to a CDN with X-Linked-Etag = SHA-256, Range requests) into the
hub cache layout, and serves what it fetched: the same greedy tokens as the local folder. Checks the interrupted
download resumes with a Range request, the token never reaches the CDN, only the files serving needs are fetched, a
second start uses the cache without the network, an error page (503) never ends up in a file, HF_HUB_OFFLINE=1 never
downloads, a wrong token and a corrupt file are clear errors.

usage: hub_download_test.py RADIXSERVE FIXTURE_DIR (a model folder: config.json, model.safetensors)"""
import hashlib
import http.server
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import urllib.request

from radixserve_server import Server
from test_checks import check

REPO = "test-org/tiny-model"
SHA = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "secret-token"


class Hub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files: dict, corrupt: set = frozenset()):
        super().__init__(("127.0.0.1", 0), HubHandler)
        self.files = files
        self.corrupt = corrupt
        self.log = []  # (method, path, range, authorization)
        self.interrupted = set()


class HubHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.answer(head=True)

    def do_GET(self):
        self.answer(head=False)

    def send(self, status: int, body: bytes = b"", headers: dict = None, head: bool = False):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def answer(self, head: bool):
        hub = self.server
        auth = self.headers.get("Authorization")
        hub.log.append((self.command, self.path, self.headers.get("Range"), auth))
        files = hub.files
        if self.path.startswith("/cdn/"):
            digest = self.path[5:]
            name = next(n for n, data in files.items() if hashlib.sha256(data).hexdigest() == digest)
            data = files[name] if name not in hub.corrupt else b"x" + files[name][1:]
            start = int(self.headers["Range"][6:].split("-")[0]) if self.headers.get("Range") else 0
            if start >= len(data):
                return self.send(416, head=head)
            if start == 0 and digest not in hub.interrupted:  # the first transfer breaks off halfway
                hub.interrupted.add(digest)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            body = data[start:]
            status = 206 if start else 200
            headers = {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"} if start else {}
            return self.send(status, body, headers, head)
        if auth != f"Bearer {TOKEN}":
            return self.send(401, b'{"error": "Invalid credentials"}', head=head)
        if self.path == f"/api/models/{REPO}/revision/main":
            body = json.dumps({"id": REPO, "sha": SHA, "siblings": [{"rfilename": n} for n in files]}).encode()
            return self.send(200, body, {"Content-Type": "application/json"}, head)
        prefix = f"/{REPO}/resolve/{SHA}/"
        if not self.path.startswith(prefix) or self.path[len(prefix):] not in files:
            return self.send(404, head=head)
        name = self.path[len(prefix):]
        data = files[name]
        if name.endswith(".safetensors"):  # an LFS file: redirected to the CDN, named by its SHA-256
            digest = hashlib.sha256(data).hexdigest()
            # To another host name, as the hub's CDN is: clients must not carry the token there.
            cdn = f"http://localhost:{self.server.server_address[1]}/cdn/{digest}"
            return self.send(302, headers={"Location": cdn, "X-Linked-Etag": f'"{digest}"',
                                           "X-Linked-Size": str(len(data)), "ETag": '"git-oid"'}, head=head)
        if not head and name == "config.json" and "busy" not in hub.interrupted:  # one error page first: not a file
            hub.interrupted.add("busy")
            return self.send(503, b"<html>busy, retry</html>", {"Retry-After": "0"})
        git_blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # the hub's ETag of a non-LFS file
        return self.send(200, data, {"ETag": f'"{git_blob}"'}, head)


def start(hub: Hub) -> str:
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{hub.server_address[1]}"


def greedy(url: str) -> list:
    body = json.dumps({"prompt": [3, 14, 15, 92, 65], "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                       "return_token_ids": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=60).read())["choices"][0]["token_ids"]


def run_fails(binary: str, env: dict, model: str) -> str:
    result = subprocess.run([binary, "serve", model, "--skip-tokenizer-init", "--port", "0"], env=env,
                            capture_output=True, text=True, timeout=60)
    check(result.returncode != 0, f"serve {model} started where it should have failed:\n{result.stderr[-2000:]}")
    return result.stderr


def main() -> None:
    binary, fixture = sys.argv[1], pathlib.Path(sys.argv[2])
    files = {p.name: p.read_bytes() for p in sorted(fixture.iterdir()) if p.is_file()}
    files["README.md"] = b"# not needed to serve"
    files["original/consolidated.pth"] = b"not needed either"
    files["1_Pooling/config.json"] = b'{"pooling_mode_lasttoken": true}'  # a sentence-transformers module's: needed
    hub = Hub(files)
    endpoint = start(hub)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HF_HOME": home, "HF_ENDPOINT": endpoint, "HF_TOKEN": TOKEN}
        env.pop("HF_HUB_CACHE", None)
        env.pop("HF_HUB_OFFLINE", None)
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            server = Server(binary, REPO, ["--skip-tokenizer-init"])
            downloaded = greedy(server.url)
            models = json.loads(urllib.request.urlopen(server.url + "/v1/models", timeout=10).read())
            server.stop()
            local = Server(binary, str(fixture), ["--skip-tokenizer-init"])
            check(greedy(local.url) == downloaded, "the downloaded model answers differently from the local folder")
            local.stop()
            check(models["data"][0]["id"] == REPO, f"served as {models['data'][0]['id']}, not {REPO}")

            root = pathlib.Path(home) / "hub" / "models--test-org--tiny-model"
            snapshot = root / "snapshots" / SHA
            check((root / "refs" / "main").read_text() == SHA, "refs/main does not name the commit")
            weights = next(n for n in files if n.endswith(".safetensors"))
            check((snapshot / weights).is_symlink() and
                  (snapshot / weights).resolve() == root / "blobs" / hashlib.sha256(files[weights]).hexdigest(),
                  "the snapshot's weights are not a link to their blob")
            check(not (snapshot / "README.md").exists() and not (snapshot / "original").exists(),
                  "files serving does not need were downloaded")
            for name, data in files.items():
                if name in ("README.md", "original/consolidated.pth"):
                    continue
                check((snapshot / name).read_bytes() == data, f"{name} differs from the hub's")
            ranges = [r for method, path, r, _ in hub.log if path.startswith("/cdn/") and method == "GET" and r]
            check(any(r.startswith("bytes=") and not r.startswith("bytes=0-") for r in ranges),
                  f"the interrupted download was not resumed with a Range request: {hub.log}")
            check(all(auth is None for _, path, _, auth in hub.log if path.startswith("/cdn/")),
                  "the token was sent to the CDN")

            # A second start reads the cache: no request at all.
            before = len(hub.log)
            server = Server(binary, REPO, ["--skip-tokenizer-init"])
            server.stop()
            check(len(hub.log) == before, f"a cached model was fetched again: {hub.log[before:]}")
        finally:
            os.environ.clear()
            os.environ.update(saved)

    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HF_HOME": home, "HF_ENDPOINT": endpoint, "HF_TOKEN": TOKEN}
        before = len(hub.log)
        error = run_fails(binary, {**env, "HF_HUB_OFFLINE": "1"}, REPO)
        check("HF_HUB_OFFLINE" in error and len(hub.log) == before, f"offline: {error[-800:]}")
        error = run_fails(binary, {**env, "HF_TOKEN": "wrong"}, REPO)
        check("401" in error and "HF_TOKEN" in error, f"wrong token: {error[-800:]}")
    corrupt_hub = Hub(files, corrupt={next(n for n in files if n.endswith(".safetensors"))})
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HF_HOME": home, "HF_ENDPOINT": start(corrupt_hub), "HF_TOKEN": TOKEN}
        error = run_fails(binary, env, REPO)
        check("corrupt" in error and "SHA-256" in error, f"corrupt file: {error[-800:]}")
    print(f"hub download: {REPO} fetched (resumed after an interruption), cached, served with the local folder's "
          "tokens; offline, wrong-token and corrupt-file refusals")


if __name__ == "__main__":
    main()
