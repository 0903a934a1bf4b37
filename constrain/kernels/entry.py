"""Call numba kernels without the dispatcher's per-call type resolution.

A numba dispatcher types every argument on every call (``typeof``: ~70 ns per array, more for
tuples) before it picks the compiled overload; the matcher's kernels take ~35 arrays, which was
3 µs of a 6 µs accept. :func:`entry_point` resolves the overload once for the exact argument types
of a call and returns its compiled entry, which only unboxes. The caller must then pass arguments
of exactly those types (same dtypes, dimensions, layouts, read-only flags): the entry does not
check them. The matcher does so for arrays it owns; anything else goes through the dispatcher.
The kernels take their arrays grouped in a few plain tuples (``kernels/README.md`` section 0);
the costs below count the arrays inside them.

Resolving through numba's ``typeof`` costs ~40 µs per argument, so resolved entries are cached
process-wide by a cheap fingerprint of the arguments (type, dtype, dimensions, layout and
write flag of each array, recursively through tuples), which fixes numba's type for the arrays
and scalars the matcher passes. Even that fingerprint costs ~0.5 µs per argument (~20 µs for
the matcher's kernels), while the dispatcher's own typing costs only ~1.4 µs more per call
than an entry (the fill kernel, ~40 arguments): :func:`cached_entry` therefore calls through
the dispatcher for the first :data:`RESOLVE_AFTER` calls of a call site and resolves only a
site that keeps being called (a new grammar's first mask resolves nothing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["RESOLVE_AFTER", "cached_entry", "entry_point"]

_CACHE: dict[tuple[int, tuple[Any, ...]], Callable[..., Any]] = {}
_LOCK = threading.Lock()
RESOLVE_AFTER = 16
"""Calls through the dispatcher before :func:`cached_entry` resolves a site's entry."""

# C_CONTIGUOUS | F_CONTIGUOUS | ALIGNED | WRITEABLE of ``ndarray.flags.num``: with the dtype and
# the number of dimensions they fix numba's array type (layout C, F or A, read-only, aligned)
_TYPE_FLAGS = 0x1 | 0x2 | 0x100 | 0x400


def _fingerprint(arg: Any) -> Any:
    if isinstance(arg, np.ndarray):
        return (arg.dtype.num, arg.ndim, arg.flags.num & _TYPE_FLAGS)
    if isinstance(arg, tuple):
        return tuple(_fingerprint(a) for a in arg)
    return type(arg)


def entry_point(dispatcher: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """Return the compiled entry of ``dispatcher`` for the types of ``args``.

    Compiles (or loads from numba's cache) when needed. With ``NUMBA_DISABLE_JIT=1`` the
    "dispatcher" is the Python function, which is returned as is.
    """
    if not hasattr(dispatcher, "overloads"):
        return dispatcher  # type: ignore[no-any-return]
    key = (id(dispatcher), tuple(_fingerprint(a) for a in args))
    found = _CACHE.get(key)
    if found is not None:
        return found
    with _LOCK:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        cres = dispatcher.overloads.get(sig)
        entry = dispatcher.compile(sig) if cres is None else cres.entry_point
        _CACHE[key] = entry
    return entry  # type: ignore[no-any-return]


def cached_entry(
    cache: dict[Any, Any], key: Any, dispatcher: Any, args: tuple[Any, ...]
) -> Callable[..., Any]:
    """Return what to call for ``dispatcher(*args)`` at the call site ``cache[key]``.

    The dispatcher itself for the site's first :data:`RESOLVE_AFTER` calls (``cache[key]``
    counts them), then the entry resolved for the types of ``args`` (kept in ``cache[key]``).
    The caller must pass arguments of those types at the site from then on, as for
    :func:`entry_point`.
    """
    hit = cache.get(key, 0)
    if type(hit) is not int:
        return hit  # type: ignore[no-any-return]
    if hit < RESOLVE_AFTER:
        cache[key] = hit + 1
        return dispatcher  # type: ignore[no-any-return]
    entry = cache[key] = entry_point(dispatcher, args)
    return entry
