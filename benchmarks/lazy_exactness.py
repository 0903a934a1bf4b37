"""Lazy against eager lexers on MaskBench schemas: equal masks, token by token.

For each schema of ``maskbench-dev.jsonl.gz`` (the same stratified sample as ``maskbench.py``,
optionally every ``--stride``-th of it, at most ``--limit``), compile
``Grammar.from_json_schema(schema, whitespace="flexible")`` twice for the Llama 3.2 vocabulary:

- eagerly: no repetition folded (``lazy_lexer.REGION_MIN`` and ``nfa.WIDE_MIN_COUNT`` out of
  reach) and no lexer too large to build whole (``lazy_lexer.EAGER_MEMBERS``), every count
  intersected with a pattern built whole as a product;
- lazily: every lexer built as it is reached (``lazy_lexer.FORCE = 8``: repetitions of 8
  copies or more folded), every such intersection a product region (``nfa.PRODUCT_FOLD = 0``);

and feed both the Llama 3.2 tokens of each instance, valid and invalid (``same_masks`` of
``saved_roundtrip.py``): before every token the two filled bitmasks must be equal, and each token
accepted by both or refused by both; at the end both agree on ``is_accepting``.

    .venv/bin/python benchmarks/lazy_exactness.py --stride 2 --limit 500

Prints one JSON line of counts (``compared``: schemas whose masks were compared, ``equal``,
``mismatch``, ``tokens``: the tokens compared, ``regions``/``products``: compared schemas with a
folded repetition / a product region, ``eager_limit``: the whole product passes a compile limit,
``compile_error``, ``timeout``) and writes it, with the failing ids, to ``--out`` (default
``benchmarks/results/lazy-exactness.json``, overwritten). Exits with status 1 on a mismatch.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from common import args_record, machine, write_result
from saved_roundtrip import (
    CompileTimeoutError,
    compile_within,
    instance_tokens,
    same_masks,
    sample_arguments,
    sample_rows,
)

from constrain import CompiledGrammar, Compiler, Grammar
from constrain.automata import lazy_lexer, nfa
from constrain.errors import CompileLimitError, GrammarError
from constrain.testing import llama3_tokenizer_path, llama3_vocabulary

_NEVER = 1 << 40


def compile_both(vocab: Any, schema: Any) -> tuple[CompiledGrammar, CompiledGrammar]:
    """Compile ``schema`` eagerly, then with every lexer lazy (module settings restored)."""
    grammar = Grammar.from_json_schema(schema, whitespace="flexible")
    saved = (lazy_lexer.REGION_MIN, lazy_lexer.FORCE, nfa.WIDE_MIN_COUNT, nfa.PRODUCT_FOLD)
    members = lazy_lexer.EAGER_MEMBERS
    try:
        lazy_lexer.REGION_MIN, nfa.WIDE_MIN_COUNT, nfa.PRODUCT_FOLD = _NEVER, _NEVER, _NEVER
        lazy_lexer.EAGER_MEMBERS = _NEVER  # (no lexer too large for an eager build either)
        eager = Compiler(vocab, cache_bytes=0).compile(grammar)
        lazy_lexer.REGION_MIN, nfa.WIDE_MIN_COUNT = saved[0], saved[2]
        lazy_lexer.FORCE, nfa.PRODUCT_FOLD = 8, 0
        lazy = Compiler(vocab, cache_bytes=0).compile(grammar)
    finally:
        lazy_lexer.REGION_MIN, lazy_lexer.FORCE, nfa.WIDE_MIN_COUNT, nfa.PRODUCT_FOLD = saved
        lazy_lexer.EAGER_MEMBERS = members
    return eager, lazy


def main() -> None:
    args = sample_arguments(__doc__.splitlines()[0], "lazy-exactness").parse_args()
    import tokenizers

    rows = sample_rows(args)
    vocab = llama3_vocabulary()
    tok = tokenizers.Tokenizer.from_file(str(llama3_tokenizer_path()))
    eos = int(vocab.eos_ids[0])
    keys = ("schemas", "compared", "equal", "mismatch", "tokens", "regions", "products")
    counts = dict.fromkeys((*keys, "eager_limit", "compile_error", "timeout"), 0)
    mismatches: list[str] = []
    started = time.perf_counter()
    for row in rows:
        if args.limit is not None and counts["compared"] >= args.limit:
            break
        counts["schemas"] += 1
        if counts["schemas"] % 100 == 0:
            print(json.dumps(counts), file=sys.stderr, flush=True)
        try:
            eager, lazy = compile_within(args.timeout_s, compile_both, vocab, row["schema"])
        except CompileTimeoutError:
            counts["timeout"] += 1
            continue
        except CompileLimitError:
            counts["eager_limit"] += 1  # the lazy build alone is checked by the test suite
            continue
        except (GrammarError, RecursionError):
            counts["compile_error"] += 1
            continue
        assert eager.lazy is None and lazy.lazy is not None
        counts["compared"] += 1
        counts["regions"] += bool(lazy.lazy.regions)
        counts["products"] += any(r.other is not None for r in lazy.lazy.regions)
        encoded = instance_tokens(tok, row)
        counts["tokens"] += sum(len(ids) + 1 for ids in encoded)
        equal = all(same_masks(eager, lazy, ids, eos) for ids in encoded)
        counts["equal" if equal else "mismatch"] += 1
        if not equal:
            mismatches.append(row["id"])
    seconds = time.perf_counter() - started
    print(json.dumps({**counts, "seconds": round(seconds, 1)}))
    record = {"machine": machine(), "args": args_record(args), "counts": counts,
              "seconds": seconds, "mismatches": mismatches}  # fmt: skip
    write_result(args.out, record)
    sys.exit(1 if counts["mismatch"] else 0)


if __name__ == "__main__":
    main()
