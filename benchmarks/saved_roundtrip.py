"""Save/load round trip of MaskBench schemas: each one that compiles loads back with equal masks.

For each schema of ``maskbench-dev.jsonl.gz`` (the same stratified sample as ``maskbench.py``,
optionally every ``--stride``-th of it, at most ``--limit``): build
``Grammar.from_json_schema(schema, whitespace="flexible")``, compile it for the Llama 3.2
vocabulary, ``CompiledGrammar.save`` it, ``CompiledGrammar.load`` it in the same process, and
feed both the Llama 3.2 tokens of each instance (valid and invalid): before every token the two
filled bitmasks must be equal, and each token must be accepted by both or refused by both (an
instance stops at its first refused token); at the end both must agree on ``is_accepting``.

    .venv/bin/python benchmarks/saved_roundtrip.py --sample 2000 --stride 4 --limit 500

Prints one JSON line of counts (``compiled``, ``round_trips`` equal, ``mismatch``, ``save_error``,
``load_error``, ``compile_error``: a GrammarError or CompileLimitError, ``compile_bug``: any other
exception from the compiler, ``timeout``) and writes it, with the failing schema ids, to
``--out`` (default ``benchmarks/results/saved-roundtrip.json``, overwritten); progress every
500 schemas on stderr. Exits with status 1 on a mismatch, save error or load error.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from common import args_record, machine, result_path, write_result
from maskbench import instance_text, load_rows, stratified_sample

from constrain import CompiledGrammar, Compiler, Grammar, Matcher
from constrain.errors import CompileLimitError, GrammarError, SavedFileError
from constrain.testing import llama3_tokenizer_path, llama3_vocabulary

T = TypeVar("T")


class CompileTimeoutError(Exception):
    """The schema's compile ran past ``--timeout-s``."""


def _raise_timeout(signum: int, frame: Any) -> None:
    raise CompileTimeoutError


def compile_within(seconds: float, build: Callable[..., T], *args: Any) -> T:
    """Return ``build(*args)``, or raise :class:`CompileTimeoutError` once it runs ``seconds``."""
    signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return build(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def compile_schema(vocab: Any, schema: Any) -> CompiledGrammar:
    """Compile ``schema`` (flexible whitespace) with a compiler that caches nothing."""
    grammar = Grammar.from_json_schema(schema, whitespace="flexible")
    return Compiler(vocab, cache_bytes=0).compile(grammar)


def sample_arguments(description: str, result: str) -> argparse.ArgumentParser:
    """The options of a check over the MaskBench sample; ``--out`` defaults to ``result``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sample", type=int, default=2000, help="stratified sample size")
    parser.add_argument("--seed", type=int, default=1, help="sample seed (maskbench.py's: 1)")
    parser.add_argument("--stride", type=int, default=1, help="every STRIDE-th sampled schema")
    parser.add_argument("--limit", type=int, default=None, help="at most this many checked")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="compile limit a schema")
    parser.add_argument("--out", type=Path, default=result_path(result))
    return parser


def sample_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The sampled MaskBench rows, every ``--stride``-th."""
    rows: list[dict[str, Any]] = stratified_sample(load_rows(), args.sample, args.seed)
    return rows[:: args.stride]


def instance_tokens(tok: Any, row: dict[str, Any]) -> list[list[int]]:
    """The Llama 3.2 token ids of each instance (valid and invalid) of ``row``."""
    texts = [instance_text(t["data"]) for t in row["tests"]]
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)] if texts else []


def same_masks(a: CompiledGrammar, b: CompiledGrammar, tokens: list[int], eos: int) -> bool:
    """Whether both grammars fill equal bitmasks and agree on every token of ``tokens``."""
    words = (a.vocab.size + 31) // 32
    ma, mb = Matcher(a), Matcher(b)
    ra, rb = np.zeros((1, words), np.int32), np.zeros((1, words), np.int32)
    for token in [*tokens, eos]:
        ma.fill_next_token_bitmask(ra)
        mb.fill_next_token_bitmask(rb)
        if not np.array_equal(ra, rb):
            return False
        ok = ma.accept_token(token)
        if ok != mb.accept_token(token):
            return False
        if not ok:
            return True
    return ma.is_accepting() == mb.is_accepting()


def main() -> None:
    args = sample_arguments(__doc__.splitlines()[0], "saved-roundtrip").parse_args()
    import tokenizers

    rows = sample_rows(args)[: args.limit]
    vocab = llama3_vocabulary()
    tok = tokenizers.Tokenizer.from_file(str(llama3_tokenizer_path()))
    eos = int(vocab.eos_ids[0])
    counts = dict.fromkeys(
        ("schemas", "compiled", "round_trips", "mismatch", "save_error", "load_error",
         "compile_error", "compile_bug", "timeout"), 0,
    )  # fmt: skip
    failures: dict[str, list[str]] = {
        "mismatch": [], "save_error": [], "load_error": [], "compile_bug": []
    }  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="saved-roundtrip-"))
    started = time.perf_counter()
    for row in rows:
        counts["schemas"] += 1
        if counts["schemas"] % 500 == 0:
            print(json.dumps(counts), file=sys.stderr, flush=True)
        try:
            compiled = compile_within(args.timeout_s, compile_schema, vocab, row["schema"])
        except CompileTimeoutError:
            counts["timeout"] += 1
            continue
        except (GrammarError, CompileLimitError, RecursionError):
            counts["compile_error"] += 1
            continue
        except Exception as err:  # noqa: BLE001 (a compiler bug: reported, not this test's)
            counts["compile_bug"] += 1
            failures["compile_bug"].append(f"{row['id']}: {type(err).__name__}: {err}"[:300])
            continue
        counts["compiled"] += 1
        path = folder / "g.npz"
        try:
            compiled.save(path)
        except Exception as err:  # noqa: BLE001 (a failure to report, whatever it is)
            counts["save_error"] += 1
            failures["save_error"].append(f"{row['id']}: {type(err).__name__}: {err}"[:300])
            continue
        try:
            loaded = CompiledGrammar.load(path, vocab)
        except SavedFileError as err:
            counts["load_error"] += 1
            failures["load_error"].append(f"{row['id']}: {err}"[:300])
            continue
        equal = loaded.grammar == compiled.grammar and all(
            same_masks(compiled, loaded, ids, eos) for ids in instance_tokens(tok, row)
        )
        counts["round_trips" if equal else "mismatch"] += 1
        if not equal:
            failures["mismatch"].append(row["id"])
    seconds = time.perf_counter() - started
    print(json.dumps({**counts, "seconds": round(seconds, 1)}))
    record = {"machine": machine(), "args": args_record(args), "counts": counts,
              "seconds": seconds, "failures": failures}  # fmt: skip
    write_result(args.out, record)
    sys.exit(1 if counts["mismatch"] or counts["save_error"] or counts["load_error"] else 0)


if __name__ == "__main__":
    main()
