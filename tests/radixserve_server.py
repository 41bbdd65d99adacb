"""The one launcher of `radixserve serve` for the Python tests and tools (the JavaScript tests have theirs in
tests/e2e/harness.mjs): a free port, the log in a file (nothing blocks on a full pipe), up once /health says ok, and
never left behind when the caller exits early."""
import atexit
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request


class Server:
    """`radixserve serve --model MODEL_DIR` on a free port until stop(). threads=None leaves --threads to the server;
    log_path keeps the server's log there (else a temporary file)."""

    def __init__(self, radixserve: str, model_dir: str, extra=(), threads=1, log_path=None, startup_s=120):
        # The server appends through its own descriptor; this side reads through another, so reading never moves
        # the server's write position.
        if log_path:
            writer = open(log_path, "w")
            self.log = open(log_path, "r")
        else:
            writer = tempfile.NamedTemporaryFile(mode="w", delete=False)
            self.log = open(writer.name, "r")
            os.unlink(writer.name)  # both descriptors stay valid; nothing is left behind
        command = [radixserve, "serve", "--model", model_dir, "--port", "0", "--log-stats-interval", "0"]
        if threads is not None:
            command += ["--threads", str(threads)]
        self.proc = subprocess.Popen(command + list(extra), stdout=subprocess.DEVNULL, stderr=writer)
        writer.close()  # the child has its own copy
        self.pid = self.proc.pid
        atexit.register(self.kill)  # a failed check exits at once: never leave the server behind
        deadline = time.time() + startup_s
        while time.time() < deadline:
            self.log.seek(0)
            match = re.search(r"listening on http://[^:]+:(\d+)", self.log.read())
            if match:
                self.port = int(match.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited while starting:\n{self.text()}")
            time.sleep(0.05)
        else:
            self.kill()
            raise RuntimeError(f"server did not start:\n{self.text()}")
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(self.url + "/health", timeout=2).status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited while loading:\n{self.text()}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server never became healthy:\n{self.text()}")

    def model(self) -> str:
        """The served model's name (the first of /v1/models)."""
        with urllib.request.urlopen(self.url + "/v1/models", timeout=10) as response:
            return json.loads(response.read())["data"][0]["id"]

    def text(self) -> str:
        """The last 4,000 characters of the server's log."""
        self.log.seek(0)
        return self.log.read()[-4000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM, and insists on a clean exit (a crash at shutdown is a failure)."""
        self.proc.terminate()
        if self.proc.wait(timeout=60) != 0:
            raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.text()}")
