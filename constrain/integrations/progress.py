"""What a slow first call says on standard error, and the third-party progress bars it hides.

- :func:`notice_once` logs a message on the ``"constrain"`` logger at WARNING level once per
  process (Python shows WARNING records on standard error when logging is not configured;
  ``logging.getLogger("constrain").setLevel(logging.ERROR)`` silences them).
- :func:`notice_kernel_compilation`: before the first compile of a process whose numba cache
  does not hold constrain's kernels yet (a fresh install), say that compiling them takes about
  a minute, once.
- :func:`notices_to`: the command line's ``constrain: ...`` lines on standard error.
- :func:`silence_progress_bars`: transformers' progress bars ("Loading weights") off for a
  block; :func:`~constrain.integrations.transformers.load_model` uses it whenever standard
  error is not a terminal, the command line also under ``--quiet``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "LOGGER",
    "kernels_cached",
    "notice_kernel_compilation",
    "notice_once",
    "notices_to",
    "silence_progress_bars",
]

LOGGER = logging.getLogger("constrain")
"""The logger of constrain's notices (first-run work, outputs cut by ``max_tokens``)."""

_NOTICED: set[str] = set()
_NOTICE_LOCK = threading.Lock()
_KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def notice_once(key: str, message: str) -> None:
    """Log ``message`` at WARNING level, the first time ``key`` is noticed in this process."""
    with _NOTICE_LOCK:
        if key in _NOTICED:
            return
        _NOTICED.add(key)
    LOGGER.warning(message)


def kernels_cached() -> bool:
    """Return whether numba's on-disk cache holds constrain's matcher kernels (best effort).

    Looks where numba's cache locators put them: ``$NUMBA_CACHE_DIR`` followed by the source
    folder's absolute path when that variable is set, else the ``__pycache__`` folder next to
    the kernels or the user-wide ``~/.cache/numba`` mirror of their path. True under
    ``NUMBA_DISABLE_JIT=1`` (nothing is compiled).
    """
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return True
    mirror = _KERNELS.relative_to(_KERNELS.anchor)
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        # numba names the folder after the source folder and a SHA-1 of its absolute path
        # (numba.core.caching._CacheLocator.get_suitable_cache_subpath); older numba mirrored it
        paths = {str(_KERNELS), os.path.abspath(Path(__file__).parents[1] / "kernels")}
        folders = [
            Path(root) / f"{_KERNELS.name}_{hashlib.sha1(p.encode()).hexdigest()}"  # noqa: S324
            for p in sorted(paths)
        ]
        folders.append(Path(root) / mirror)
    else:
        folders = [_KERNELS / "__pycache__", Path.home() / ".cache" / "numba" / mirror]
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return any(
        folder.is_dir() and any(folder.glob(f"numba_match.*.{tag}.nbi")) for folder in folders
    )


def notice_kernel_compilation() -> None:
    """Say once, when numba's cache lacks constrain's kernels, that compiling them takes time."""
    if not kernels_cached():
        notice_once(
            "kernels",
            "first run in this environment: compiling constrain's numba kernels into numba's "
            "on-disk cache (about a minute on 2 cores; later runs reuse it)",
        )


@contextlib.contextmanager
def silence_progress_bars(silence: bool = True) -> Iterator[None]:
    """Turn transformers' progress bars off while the block runs (when ``silence``).

    Bars already off stay off; bars this turned off are turned back on afterwards. The GGUF
    conversion's bar is a plain ``tqdm`` that transformers' switch does not reach: its module's
    ``tqdm`` is replaced by a disabled one meanwhile.
    """
    from transformers.utils import logging as hf_logging

    if not silence:
        yield
        return
    gguf_utils: Any = None
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # pragma: no cover - transformers without GGUF support
        pass
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = functools.partial(bar, disable=True)
    enabled = hf_logging.is_progress_bar_enabled()
    if enabled:
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        if bar is not None:
            gguf_utils.tqdm = bar


@contextlib.contextmanager
def notices_to(stream: IO[str], *, quiet: bool = False) -> Iterator[None]:
    """Write the ``"constrain"`` logger's records to ``stream`` while the block runs.

    Each record is one ``constrain: <message>`` line; with ``quiet`` only errors are written.
    The records do not propagate to the root logger meanwhile (no second copy).
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("constrain: %(message)s"))
    handler.setLevel(logging.ERROR if quiet else logging.WARNING)
    LOGGER.addHandler(handler)
    propagate, LOGGER.propagate = LOGGER.propagate, False
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.propagate = propagate
