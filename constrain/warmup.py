"""The install warm-up: compile every numba kernel constrain calls into numba's on-disk cache.

``python -m constrain.warmup`` (run by ``make install``, before the demo) drives the engine
through every path that dispatches a numba kernel from Python: compiling grammars of every kind
(:data:`~constrain.warmup_grammars.WARM_UP_GRAMMARS`, a list vLLM's warm-up shares: regexes,
the empty regex, Lark with ignored terminals, JSON Schemas with intersections, complements,
counting automata and long counted strings), saving and loading a compiled grammar, filling
masks (single and batched in threads), accepting, validating, rolling back, forking,
jump-forward, canonical tokenization's relation, applying bitmasks to float32, float16 and
bfloat16 logits, a DINGO diffusion step and the CPU model head's skinny product. It
also compiles every JSON Schema ``format`` twice, which leaves the minimal DFAs of the big format
bodies in the process's cache (:mod:`constrain.automata.nfa`): a server calls :func:`warm_up`
once at start (about 7 s on a warm cache).
Kernels take one fixed type per argument (``constrain.kernels.jit_guard``), so afterwards no
constrain call compiles anything: a fresh process loads the machine code from the cache. It
prints how many kernel signatures it compiled and how many it found in the cache.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch

from constrain.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from constrain.compiler import CompiledGrammar, Compiler
from constrain.diffusion.dingo_lave import dingo
from constrain.diffusion.token_dfa import TokenDfa
from constrain.integrations.cpu_layers import SkinnyLinear
from constrain.ir import Grammar
from constrain.kernels.entry import RESOLVE_AFTER
from constrain.kernels.jit_guard import jit_report
from constrain.matcher import Matcher, fill_next_token_bitmasks
from constrain.vocab.bpe_source import GPT2_PATTERN
from constrain.vocab.canonical import CanonicalBpe
from constrain.vocab.vocabulary import Vocabulary
from constrain.warmup_grammars import WARM_UP_GRAMMARS, WARM_UP_SCHEMA

__all__ = ["warm_up"]


def _drive(compiled: CompiledGrammar, steps: int) -> None:
    """Fill, accept, validate, roll back, fork and jump forward along the first allowed tokens.

    More than ``RESOLVE_AFTER`` fills and accepts, so the hot sites resolve their compiled
    entries (``constrain.kernels.entry``) as a long generation does.
    """
    bitmask = allocate_token_bitmask(1, compiled.vocab.size)
    matcher = Matcher(compiled)
    eos = set(compiled.vocab.eos_ids.tolist())
    for _ in range(steps):
        matcher.fill_next_token_bitmask(bitmask)
        allowed = matcher.allowed_token_ids()
        candidates = [t for t in allowed.tolist() if t not in eos]
        if not candidates:
            break
        token = candidates[len(candidates) // 2]
        matcher.validate_tokens([token, token])
        matcher.forced_bytes()
        matcher.is_accepting()
        if not matcher.accept_token(token):
            break
    if matcher.num_accepted_tokens:
        matcher.rollback(1)
    other = matcher.fork()
    other.accept_bytes(b"1")
    matchers = [Matcher(compiled) for _ in range(4)] + [other]
    batch = allocate_token_bitmask(len(matchers), compiled.vocab.size)
    fill_next_token_bitmasks(matchers, batch, num_threads=2)


def _other_kernels(compiler: Compiler) -> None:
    """Run the kernels outside the grammar engine: a diffusion step and the CPU model head."""
    compiled = compiler.compile(Grammar.from_regex(r"\d{3}-\d{4}"))
    width = compiled.vocab.model_vocab_size
    dingo(TokenDfa.from_compiled(compiled), np.zeros((4, width)), mask_logp=np.zeros(4))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the skinny kernel serves torch on few threads only
    try:
        with torch.inference_mode():
            SkinnyLinear(64, 96)(torch.zeros((2, 64)))
    finally:
        torch.set_num_threads(threads)


def _canonical(compiler: Compiler) -> None:
    """Run canonical tokenization's kernels: merges of the vocabulary's two-byte tokens."""
    vocab = compiler.vocab
    single = {vocab.token_bytes_of(t): t for t in range(vocab.size) if vocab.token_lengths[t] == 1}
    merges = []
    for t in range(vocab.size):
        data = vocab.token_bytes_of(t)
        if len(data) == 2 and data[:1] in single and data[1:] in single:
            merges.append((single[data[:1]], single[data[1:]], t, t))
    canonical = CanonicalBpe(vocab, merges, GPT2_PATTERN)
    compiled = compiler.compile(Grammar.from_regex("[a-z]{1,8}"))
    _drive_canonical(Matcher(compiled, canonical=canonical), 4)


def _drive_canonical(matcher: Matcher, steps: int) -> None:
    for _ in range(steps):
        allowed = matcher.allowed_token_ids().tolist()
        if not allowed or not matcher.accept_token(allowed[len(allowed) // 2]):
            break


def warm_up(vocab: Vocabulary) -> None:
    """Run every kernel path once, compiling (or loading from numba's cache) each kernel.

    Parameters
    ----------
    vocab : Vocabulary
        Any vocabulary (the kernels' types do not depend on it; a real one reaches the token
        classes that only large vocabularies build).
    """
    compiler = Compiler(vocab, cache_bytes=0)
    for entry in WARM_UP_GRAMMARS:
        compiled = compiler.compile(entry.grammar())
        _drive(compiled, 2 * RESOLVE_AFTER + 2)
        # what the token tables compute inside long string bodies once it pays (time-based)
        compiled.lexer.bounded_classes(vocab.max_token_length + 1, [0])
    # more token-table entries than a new index holds (one per lexer state here): it grows
    compiler.compile(Grammar.from_regex("[0-9]{1,1200}")).precompute(60.0)
    with tempfile.TemporaryDirectory(prefix="constrain-warmup-") as folder:
        path = Path(folder) / "g.npz"
        compiler.compile(Grammar.from_json_schema(WARM_UP_SCHEMA)).save(path)
        _drive(CompiledGrammar.load(path, vocab), 4)
    _other_kernels(compiler)
    _canonical(compiler)
    width = (vocab.size + 31) // 32
    bitmask = allocate_token_bitmask(2, vocab.size)
    bitmask[:, ::2] = 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        logits = torch.zeros((2, 32 * width + 7), dtype=dtype)
        apply_token_bitmask_inplace(logits, bitmask, backend="numba")
        apply_token_bitmask_inplace(logits, bitmask, backend="numba", indices=[1])


def main() -> None:
    """Warm up on the Llama 3.2 vocabulary and print what was compiled and what was cached."""
    from constrain.testing import llama3_vocabulary

    warm_up(llama3_vocabulary())
    report = jit_report()
    compiled = sum(r["cache_misses"] for r in report.values())
    cached = sum(r["cache_hits"] for r in report.values())
    kernels = sum(len(r["signatures"]) for r in report.values())
    print(
        f"constrain warm-up: {len(report)} kernels, {kernels} signatures: {compiled} compiled, "
        f"{cached} loaded from numba's cache"
    )


if __name__ == "__main__":
    main()
