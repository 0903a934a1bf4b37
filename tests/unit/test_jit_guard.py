"""No JIT on a request: after the install warm-up, a fresh process compiles no numba kernel.

The guard runs the documented warm-up (``python -m constrain.warmup``, what ``make install``
runs) in a child with the running suite's ``NUMBA_CACHE_DIR`` (a fresh one in CI: the warm-up then
fills it) and again in a fresh child, which must load everything from the cache and dispatch one
signature per entry kernel; then a third fresh child loads a saved compiled grammar, compiles
the empty regex and fills their first masks, and the test fails if numba compiled anything
there (a cache miss of any kernel dispatcher: ``constrain.kernels.jit_guard.jit_report``) or
used a signature the warm-up did not. Counts, not timers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytest

from constrain import CompiledGrammar, Compiler, Grammar, Matcher
from constrain.kernels.jit_guard import entry_kernels
from constrain.testing import llama3_vocabulary, tiny_vocabulary

JIT = os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")
# entry kernels with more than one signature by design (every other one has exactly one): the
# bitmask is applied to the logits' bits as int32 (float32 logits) or int16 (float16, bfloat16)
SIGNATURES = {"numba_mask.apply_bitmask_kernel": 2}

WARM_UP = """
import json
from constrain.kernels.jit_guard import jit_report
from constrain.warmup import main
main()
print(json.dumps(jit_report()))
"""
FIRST_MASKS = """
import json, sys
import numpy as np
from constrain import CompiledGrammar, Compiler, Grammar, Matcher
from constrain.kernels.jit_guard import jit_report
from constrain.testing import llama3_vocabulary
vocab = llama3_vocabulary()
bitmask = np.zeros((1, (vocab.size + 31) // 32), dtype=np.int32)
loaded = CompiledGrammar.load(sys.argv[1], vocab)
Matcher(loaded).fill_next_token_bitmask(bitmask)
Matcher(Compiler(vocab).compile(Grammar.from_regex(""))).fill_next_token_bitmask(bitmask)
matcher = Matcher(loaded)
for chunk in ('{"a":1', ',"b":"x'):
    matcher.accept_bytes(chunk)
    matcher.fill_next_token_bitmask(bitmask)
print(json.dumps(jit_report()))
"""


def _report(script: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.skipif(not JIT, reason="numba JIT disabled (NUMBA_DISABLE_JIT=1)")
def test_no_kernel_compiles_after_the_warm_up(tmp_path: Path) -> None:
    _report(WARM_UP)  # fills the cache: compiles what it lacks, callees typed by callers too
    # a second warm-up in a fresh process loads every kernel from the cache, so it lists only
    # the signatures that Python code dispatches: one per entry kernel
    warm = _report(WARM_UP)
    assert {key: r["cache_misses"] for key, r in warm.items() if r["cache_misses"]} == {}
    counts = {key: len(r["signatures"]) for key, r in warm.items() if r["entry"]}
    assert {key: n for key, n in counts.items() if n > 1} == SIGNATURES
    assert entry_kernels() <= set(counts)  # the warm-up reaches every entry kernel
    vocab = llama3_vocabulary()
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    Compiler(vocab).compile(Grammar.from_json_schema(schema)).save(tmp_path / "g.npz")
    fresh = _report(FIRST_MASKS, str(tmp_path / "g.npz"))
    assert {"numba_match.fill_row_kernel", "numba_dfa.continuation_bits_kernel"} <= set(fresh)
    compiled = {key: r["cache_misses"] for key, r in fresh.items() if r["cache_misses"]}
    assert compiled == {}, f"numba compiled kernels on a request: {compiled}"
    for key, r in fresh.items():
        assert set(r["signatures"]) <= set(warm[key]["signatures"]), key


def test_loaded_and_empty_grammars_pass_the_kernels_the_same_types(tmp_path: Path) -> None:
    vocab = tiny_vocabulary()
    compiler = Compiler(vocab)
    compiled = compiler.compile(Grammar.builtin("json"))
    compiled.save(tmp_path / "g.npz")
    loaded = CompiledGrammar.load(tmp_path / "g.npz", vocab)
    empty = compiler.compile(Grammar.from_regex(""))
    expected = numba.typeof(compiled.match_arrays)
    assert numba.typeof(loaded.match_arrays) == expected
    assert numba.typeof(empty.match_arrays) == expected
    for lexer in (compiled.lexer, loaded.lexer, empty.lexer):
        arrays = (lexer.byte_class, lexer.trans, lexer.accept_bits, lexer.alive_bits)
        assert not any(a.flags.writeable for a in arrays)


def test_a_read_only_bitmask_is_refused_before_any_kernel() -> None:
    vocab = tiny_vocabulary()
    matcher = Matcher(Compiler(vocab).compile(Grammar.from_regex("[ab]+")))
    bitmask = np.zeros((1, (vocab.size + 31) // 32), dtype=np.int32)
    bitmask.flags.writeable = False
    with pytest.raises(ValueError, match="bitmask is read-only"):
        matcher.fill_next_token_bitmask(bitmask)
