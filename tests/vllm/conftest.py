"""Fixtures of the vLLM integration tests (run with `make test-vllm`, in .venv-vllm).

vLLM runs on the CPU with the default SmolLM2-135M model, converted once to a safetensors folder
by :func:`constrain.integrations.transformers.convert_default_model`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# set before vLLM is imported: no hub access, a small KV cache, the CPU platform
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
# numba's cache of constrain's kernels, apart from the main .venv's: the two environments have
# different numba versions, and sharing constrain/kernels/__pycache__ makes each invalidate the
# other's cache (a 25-40 s recompile in every vLLM worker)
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(sys.prefix) / "numba-cache"))

# the shared cases module sits next to this file (pytest runs with --import-mode=importlib)
sys.path.insert(0, str(Path(__file__).parent))

pytest.importorskip("vllm", reason="vLLM is not installed: run `make test-vllm`")

from vllm_cases import TOOL_PARSER  # noqa: E402 (after the path is set)
from vllm_serve import serve  # noqa: E402

# SmolLM2 has no reasoning tokens: the reasoning model is a copy whose tokenizer names two unused
# added tokens <think> and </think> (ordinary, not special: they stay in the output text, as
# Qwen3's do), which vLLM's deepseek_r1 parser needs as single tokens
THINK_TOKENS = {"<issue_start>": "<think>", "<issue_comment>": "</think>"}


@pytest.fixture(scope="session")
def model_path() -> Path:
    from constrain.integrations.transformers import convert_default_model

    return convert_default_model()


@pytest.fixture(scope="session")
def reasoning_model_path(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reasoning-model")
    for item in model_path.iterdir():
        if item.name != "tokenizer.json":
            (out / item.name).symlink_to(item)
    data = json.loads((model_path / "tokenizer.json").read_text())
    for token in data["added_tokens"]:
        if token["content"] in THINK_TOKENS:
            token["content"] = THINK_TOKENS[token["content"]]
            token["special"] = False
    vocab = data["model"]["vocab"]
    for old, new in THINK_TOKENS.items():
        vocab[new] = vocab.pop(old)
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
    return out


@pytest.fixture(scope="session")
def server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose tool parser reads SmolLM2's call format (tool requests go to constrain)."""
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    with serve(
        model_path, ["--enable-auto-tool-choice", "--tool-call-parser", TOOL_PARSER], log
    ) as base:
        yield base
