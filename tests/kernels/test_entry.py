"""Resolved kernel entries: one per numba array type, and each one right for its arrays."""

from __future__ import annotations

import numpy as np
from numba import njit

from constrain.kernels.entry import RESOLVE_AFTER, cached_entry, entry_point


@njit(nogil=True)
def _total(values, scale):  # type: ignore[no-untyped-def]
    out = 0.0
    for x in values.flat:
        out += x
    return out * scale


def test_each_layout_and_write_flag_gets_its_own_entry_and_the_right_answer() -> None:
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    frozen = base.copy()
    frozen.flags.writeable = False
    cases = {
        "C": base,
        "F": np.asfortranarray(base),
        "A": base[:, ::2],
        "read-only": frozen,
    }
    entries = {}
    for name, arr in cases.items():
        entry = entry_point(_total, (arr, 2.0))
        assert entry(arr, 2.0) == 2.0 * arr.sum(), name
        entries[name] = entry
        # the same types again: the same resolved entry
        assert entry_point(_total, (arr.copy(order="K") if name == "C" else arr, 2.0)) is entry
    if hasattr(_total, "overloads"):  # not under NUMBA_DISABLE_JIT=1
        assert len({id(e) for e in entries.values()}) == len(cases)


def test_a_call_site_resolves_its_entry_after_the_dispatcher_served_it() -> None:
    values = np.arange(5, dtype=np.float64)
    cache: dict[str, object] = {}
    seen = []
    for _ in range(RESOLVE_AFTER + 3):
        fn = cached_entry(cache, "site", _total, (values, 3.0))
        assert fn(values, 3.0) == 30.0
        seen.append(fn)
    # the dispatcher for the first RESOLVE_AFTER calls, then one resolved entry throughout
    assert all(fn is _total for fn in seen[:RESOLVE_AFTER])
    assert seen[RESOLVE_AFTER] is seen[-1] is entry_point(_total, (values, 3.0))
    assert cache["site"] is seen[-1]
