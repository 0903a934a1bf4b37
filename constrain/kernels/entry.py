"""Call numba kernels without the dispatcher's per-call type resolution.

A numba dispatcher types every argument on every call (``typeof``: ~70 ns per array, more for
tuples) before it picks the compiled overload; the matcher's kernels take ~35 arrays, so that is
3 µs of a 6 µs accept. :func:`entry_point` resolves the overload once, for the exact argument
types of a call, and returns its compiled entry, which only unboxes. The caller must then pass
arguments of exactly those types (same dtypes, dimensions, layouts, read-only flags): the entry
does not check them. The matcher does so for arrays it owns; anything else goes through the
dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["entry_point"]


def entry_point(dispatcher: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """Return the compiled entry of ``dispatcher`` for the types of ``args``.

    Compiles (or loads from numba's cache) when needed. With ``NUMBA_DISABLE_JIT=1`` the
    "dispatcher" is the Python function, which is returned as is.
    """
    if not hasattr(dispatcher, "overloads"):
        return dispatcher  # type: ignore[no-any-return]
    sig = tuple(dispatcher.typeof_pyval(a) for a in args)
    cres = dispatcher.overloads.get(sig)
    if cres is None:
        return dispatcher.compile(sig)  # type: ignore[no-any-return]
    return cres.entry_point  # type: ignore[no-any-return]
