"""What numba compiled in this process: every kernel dispatcher, its signatures and cache use.

No JIT on a request: every kernel is called with one fixed type per argument (arrays normalised
at the boundary: read-only or writable as their owner makes them, C-contiguous, exact dtypes),
the install warm-up (``python -m constrain.warmup``) compiles all of them into numba's on-disk
cache, and a later process only loads them. :func:`jit_report` tells, per dispatcher of
``constrain/kernels/numba_*.py``, which signatures this process has and how many were loaded from
the cache (``cache_hits``) or compiled (``cache_misses``); ``tests/unit/test_jit_guard.py`` fails
when a fresh process compiles anything after the warm-up.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Any

from numba.core.registry import CPUDispatcher

import constrain.kernels

__all__ = ["entry_kernels", "jit_report", "kernel_dispatchers"]


def kernel_dispatchers() -> dict[str, Any]:
    """Return every numba dispatcher defined in ``constrain/kernels/numba_*.py``.

    Returns
    -------
    dict of str to numba dispatcher
        Keyed ``"<module>.<function>"`` (``"numba_match.fill_row_kernel"``), sorted. Empty under
        ``NUMBA_DISABLE_JIT=1``, where the kernels are plain Python functions.
    """
    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(constrain.kernels.__path__):
        if not info.name.startswith("numba_"):
            continue
        module = importlib.import_module(f"{constrain.kernels.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__:
                found[f"{info.name}.{name}"] = obj
    return dict(sorted(found.items()))


def entry_kernels() -> set[str]:
    """Return the dispatchers that Python code of constrain calls (the kernels' entry points).

    A dispatcher that a ``constrain`` module outside ``constrain.kernels`` imports (at its top
    or inside a function) is called from Python with the arguments that module builds; the
    others are only called from other kernels, which type them once per caller (several
    signatures for one caller, from literal and integer arguments, are normal there).

    Returns
    -------
    set of str
        Keys of :func:`kernel_dispatchers`, read from the import statements of the package's
        source files.
    """
    known = kernel_dispatchers()
    package = Path(constrain.kernels.__file__).resolve().parent.parent
    prefix = f"{constrain.kernels.__name__}."
    found: set[str] = set()
    for path in package.rglob("*.py"):
        if path.parent.name == "kernels":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix):
                module = node.module.removeprefix(prefix)  # type: ignore[union-attr]
                found.update(f"{module}.{a.name}" for a in node.names)
    return found & set(known)


def jit_report() -> dict[str, dict[str, Any]]:
    """Return, for each dispatcher used in this process, its signatures and cache statistics.

    Returns
    -------
    dict of str to dict
        ``{"<module>.<function>": {"entry": bool, "signatures": [str, ...], "cache_hits": int,
        "cache_misses": int}}`` for the dispatchers with at least one signature; ``entry``
        tells an entry point (:func:`entry_kernels`). A cache miss is a compilation in this
        process (numba found no cached machine code for the types).
    """
    entries = entry_kernels()
    out: dict[str, dict[str, Any]] = {}
    for key, dispatcher in kernel_dispatchers().items():
        if not dispatcher.signatures:
            continue
        stats = dispatcher.stats
        out[key] = {
            "entry": key in entries,
            "signatures": sorted(str(sig) for sig in dispatcher.signatures),
            "cache_hits": int(sum(stats.cache_hits.values())),
            "cache_misses": int(sum(stats.cache_misses.values())),
        }
    return out
