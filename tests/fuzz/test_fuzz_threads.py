"""Fuzz: random interleavings of fill / accept / rollback / fork across threads.

Matchers of one compiled grammar share its lazily built token tables. Each thread drives its own
matchers through a random program of operations; every mask it sees must equal the mask of a
single-threaded replay of the same program on a fresh compilation.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from fuzz.budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from constrain.bitmask import allocate_token_bitmask
from constrain.compiler import CompiledGrammar, Compiler
from constrain.ir import Grammar
from constrain.matcher import Matcher
from constrain.testing import tiny_vocabulary

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "tags": {"type": "array", "items": {"enum": ["a", "bc"]}},
        "n": {"type": "integer"},
    },
    "required": ["name"],
}
GRAMMARS = {
    "json": lambda: Grammar.from_json_schema(SCHEMA),
    "regex": lambda: Grammar.from_regex(r"(ab|[a-c]{1,3}\d)+ ?[xyz]*"),
    "lark": lambda: Grammar.from_lark('start: item+\nitem: "(" start? ")" | WORD\nWORD: /[a-c]+/'),
}
Op = tuple[str, int]
programs = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["fill", "accept", "accept", "rollback", "fork"]), st.integers(0, 10**6)
        ),
        min_size=1,
        max_size=25,
    ),
    min_size=2,
    max_size=4,
)


def _run(
    compiled: CompiledGrammar, program: list[Op], barrier: threading.Barrier | None
) -> list[Any]:
    """Run one program; return what it observed (masks as id lists, accept results)."""
    if barrier is not None:
        barrier.wait()
    matchers = [Matcher(compiled)]
    bitmask = allocate_token_bitmask(1, compiled.vocab.model_vocab_size)
    seen: list[Any] = []
    for op, arg in program:
        m = matchers[arg % len(matchers)]
        if op == "fill":
            m.fill_next_token_bitmask(bitmask)
            seen.append(np.asarray(bitmask).tobytes())
        elif op == "accept":
            allowed = m.allowed_token_ids()
            if allowed.size:
                token = int(allowed[arg % allowed.size])
                seen.append(("accept", token, m.accept_token(token)))
        elif op == "rollback":
            k = min(arg % 3, m.num_accepted_tokens)
            m.rollback(k)
            seen.append(("rollback", k))
        elif len(matchers) < 4:
            matchers.append(m.fork())
    seen.append([mm.allowed_token_ids().tolist() for mm in matchers])
    return seen


@fuzz_settings(0.5)
@given(kind=st.sampled_from(sorted(GRAMMARS)), programs=programs)
def test_threads_see_the_masks_of_a_single_threaded_replay(
    kind: str, programs: list[list[Op]]
) -> None:
    vocab = tiny_vocabulary()
    shared = Compiler(vocab).compile(GRAMMARS[kind]())  # a new Compiler: cold token tables
    results: list[list[Any]] = [[] for _ in programs]
    barrier = threading.Barrier(len(programs))

    def work(i: int) -> None:
        results[i] = _run(shared, programs[i], barrier)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(programs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, program in enumerate(programs):
        fresh = Compiler(vocab).compile(GRAMMARS[kind]())
        assert results[i] == _run(fresh, program, None), (kind, i)
