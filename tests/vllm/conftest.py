"""Fixtures of the vLLM integration tests (run with `make test-vllm`, in .venv-vllm).

vLLM runs on the CPU with the default SmolLM2-135M model, converted once to a safetensors folder
by :func:`constrain.integrations.transformers.convert_default_model`.
"""

from __future__ import annotations

import os
import sys
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


@pytest.fixture(scope="session")
def model_path() -> Path:
    from constrain.integrations.transformers import convert_default_model

    return convert_default_model()
