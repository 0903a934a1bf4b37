"""JSON-Schema-Test-Suite conformance runner for ``constrain.Grammar.from_json_schema``.

Stage: the JSON Schema front end, end to end (schema -> grammar -> token automaton -> matcher).

Each group of the official suite has one schema and several instances marked valid or invalid.
The schema is compiled once (``whitespace="compact", any_order=True``; ``formats="ignore"`` for
the required files, ``"enforce"`` for ``optional/format``), every instance is serialised
compactly (``json.dumps(data, separators=(",", ":"), ensure_ascii=False)``), tokenized with the
Llama 3.2 tokenizer and fed to a fresh :class:`constrain.Matcher`. An instance is *accepted* when
every token is accepted and the matcher is then accepting. Each case gets one status:

==================  =============================================================
``pass``            accepted exactly when the suite says valid
``false_positive``  an invalid instance was accepted
``false_negative``  a valid instance was rejected
``compile_error``   the schema raised ``JsonSchemaError`` / ``GrammarError``
``limit``           the schema raised ``CompileLimitError``
``unsupported``     the schema needs documents the suite does not ship (remote refs)
``crash``           any other exception (type and message kept in the details)
==================  =============================================================

``tests/conformance/test_json_schema_suite.py`` is the ratchet over these statuses; the CLI
prints the tables and rewrites the committed baseline::

    .venv/bin/python benchmarks/json_schema_suite.py                   # tables, results file
    .venv/bin/python benchmarks/json_schema_suite.py --update-baseline # rewrite the baseline

The status counts per set and per file go to ``benchmarks/results/json-schema-suite.json``
(overwritten; ``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by path from tests/conformance
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, data_dir, machine, result_path, shown, write_result  # noqa: E402

BASELINE = ROOT / "tests" / "conformance" / "json_schema_suite_baseline.json"
SUITE_DIR = "json-schema-test-suite/tests"

SETS: dict[str, tuple[str, str, str]] = {
    # set name: (folder under SUITE_DIR, formats option, dialect of schemas without $schema)
    "draft2020-12": ("draft2020-12", "ignore", "2020-12"),
    "draft2020-12-format": ("draft2020-12/optional/format", "enforce", "2020-12"),
    "draft7": ("draft7", "ignore", "7"),
    "draft7-format": ("draft7/optional/format", "enforce", "7"),
}
"""The four case sets: the required files of each draft and their ``optional/format`` files."""

STATUSES = (
    "pass",
    "false_positive",
    "false_negative",
    "compile_error",
    "limit",
    "unsupported",
    "crash",
)

REMOTE_FILES = frozenset({"refRemote.json"})
"""Files whose every group needs remote documents (``http://localhost:1234/...``)."""

REMOTE_PREFIX = "http://localhost:1234/"

SCHEMA_OPTIONS: dict[str, Any] = {"whitespace": "compact", "any_order": True}


def find_data_dir() -> Path | None:
    """Return the shared data folder: ``$CONSTRAIN_DATA``, else ``../shared/data`` from the root.

    Returns
    -------
    Path or None
        The first candidate that is a directory (the lookup of ``tests/conftest.py``).
    """
    return data_dir()


@dataclass(frozen=True)
class Case:
    """One instance of one group: its id, description, serialised text and expected verdict."""

    case_id: str
    description: str
    text: str
    valid: bool


@dataclass(frozen=True)
class Group:
    """One schema of a suite file with its cases."""

    file: str
    schema: Any
    cases: tuple[Case, ...]
    needs_remote: bool


def _walk(node: Any, base: str) -> Iterator[tuple[str, str, str]]:
    """Yield ``(keyword, value, base URI)`` for each ``$id``/``$ref``-like string in ``node``."""
    if isinstance(node, dict):
        ident = node.get("$id")
        if isinstance(ident, str):
            base = urljoin(base, ident)
            yield "$id", ident, base
        for key in ("$ref", "$dynamicRef", "$schema"):
            value = node.get(key)
            if isinstance(value, str):
                yield key, value, base
        for value in node.values():
            yield from _walk(value, base)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value, base)


def needs_remote(schema: Any) -> bool:
    """Return whether ``schema`` refers to a ``localhost:1234`` document it does not define.

    Parameters
    ----------
    schema : object
        A suite schema.

    Returns
    -------
    bool
        True when a ``$ref``, ``$dynamicRef`` or ``$schema`` resolves (against the enclosing
        ``$id`` bases) to a remote suite document not embedded in the schema.
    """
    refs = list(_walk(schema, ""))
    known = {urldefrag(base).url for kind, _, base in refs if kind == "$id"}
    for kind, value, base in refs:
        if kind == "$id":
            continue
        target = urldefrag(urljoin(base, value)).url
        if target.startswith(REMOTE_PREFIX) and target not in known:
            return True
    return False


def serialise(data: Any) -> str:
    """Return the compact JSON text of an instance, as the matcher is fed it.

    Parameters
    ----------
    data : object
        A decoded JSON value.

    Returns
    -------
    str
        ``json.dumps(data, separators=(",", ":"), ensure_ascii=False)``, or its ASCII form when
        the text holds a lone surrogate (not encodable as UTF-8).
    """
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data, separators=(",", ":"))
    return text


def set_dir(set_name: str, data_dir: Path | None = None) -> Path:
    """Return the folder of one case set.

    Parameters
    ----------
    set_name : str
        A key of :data:`SETS`.
    data_dir : Path, optional
        The shared data folder (default: :func:`find_data_dir`).

    Returns
    -------
    Path

    Raises
    ------
    FileNotFoundError
        If the shared data or the set's folder is missing.
    """
    base = data_dir if data_dir is not None else find_data_dir()
    if base is None:
        raise FileNotFoundError(
            "shared data not found: set CONSTRAIN_DATA or provide ../shared/data"
        )
    folder = base / SUITE_DIR / SETS[set_name][0]
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is missing")
    return folder


def load_groups(set_name: str, data_dir: Path | None = None) -> list[Group]:
    """Read every group of one case set, in file-name order.

    Parameters
    ----------
    set_name : str
        A key of :data:`SETS`.
    data_dir : Path, optional
        The shared data folder (default: :func:`find_data_dir`).

    Returns
    -------
    list of Group
        Case ids are ``"<set>/<file>/<group index>/<case index>"``.
    """
    groups = []
    for path in sorted(set_dir(set_name, data_dir).glob("*.json")):
        for g_idx, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            cases = tuple(
                Case(
                    case_id=f"{set_name}/{path.name}/{g_idx}/{c_idx}",
                    description=f"{group['description']} / {test['description']}",
                    text=serialise(test["data"]),
                    valid=bool(test["valid"]),
                )
                for c_idx, test in enumerate(group["tests"])
            )
            remote = path.name in REMOTE_FILES or needs_remote(group["schema"])
            groups.append(Group(path.name, group["schema"], cases, remote))
    return groups


@dataclass
class SuiteRunner:
    """Compiler, tokenizer and per-schema compile cache shared by every set of a run."""

    compiler: Any = None
    tokenizer: Any = None
    cache: dict[str, tuple[str, Any]] = field(default_factory=dict)
    compile_s: float = 0.0
    match_s: float = 0.0

    def __post_init__(self) -> None:
        if self.compiler is None:
            import constrain
            from constrain.testing import llama3_vocabulary

            self.compiler = constrain.Compiler(llama3_vocabulary())
        if self.tokenizer is None:
            import tokenizers

            from constrain.testing import llama3_tokenizer_path

            self.tokenizer = tokenizers.Tokenizer.from_file(str(llama3_tokenizer_path()))

    def compile(self, schema: Any, formats: str, draft: str = "2020-12") -> tuple[str, Any]:
        """Compile ``schema`` once; return ``("ok", compiled)`` or ``(status, error text)``.

        A schema that no instance satisfies is refused at compile time with a
        ``JsonSchemaError`` saying so; that refusal is the verdict "every instance is
        invalid" and is returned as ``("ok", None)``, a matcher that accepts nothing.
        """
        key = f"{formats}\x00{draft}\x00{json.dumps(schema, sort_keys=True)}"
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        import constrain

        t0 = time.perf_counter()
        result: tuple[str, Any]
        try:
            grammar = constrain.Grammar.from_json_schema(
                schema, formats=formats, draft=draft, **SCHEMA_OPTIONS
            )
            result = ("ok", self.compiler.compile(grammar))
        except constrain.JsonSchemaError as exc:
            if "accepts no JSON value" in str(exc):
                result = ("ok", None)
            else:
                result = ("compile_error", f"{type(exc).__name__}: {exc}")
        except constrain.CompileLimitError as exc:
            result = ("limit", f"CompileLimitError: {exc}")
        except constrain.GrammarError as exc:
            result = ("compile_error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # any other failure is a crash of the engine, kept with its text
            result = ("crash", f"{type(exc).__name__}: {exc}")
        self.compile_s += time.perf_counter() - t0
        self.cache[key] = result
        return result

    def accepts(self, compiled: Any, text: str) -> bool:
        """Whether every token of ``text`` is accepted and the matcher is then accepting."""
        import constrain

        if compiled is None:  # the schema accepts nothing
            return False
        token_ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        t0 = time.perf_counter()
        try:
            matcher = constrain.Matcher(compiled)
            return matcher.accept_tokens(token_ids) == len(token_ids) and matcher.is_accepting()
        finally:
            self.match_s += time.perf_counter() - t0


def run_suite(
    set_name: str,
    *,
    data_dir: Path | None = None,
    runner: SuiteRunner | None = None,
    details: dict[str, str] | None = None,
) -> dict[str, str]:
    """Run one case set and return the status of every case.

    Parameters
    ----------
    set_name : str
        A key of :data:`SETS` (``"draft2020-12"``, ``"draft2020-12-format"``, ``"draft7"``,
        ``"draft7-format"``).
    data_dir : Path, optional
        The shared data folder (default: ``$CONSTRAIN_DATA``, else ``../shared/data``).
    runner : SuiteRunner, optional
        Reuse a runner (its compiler, tokenizer and compile cache) across sets.
    details : dict, optional
        Filled with ``case_id -> description``, followed by ``" :: "`` and the error text for
        ``compile_error``, ``limit`` and ``crash`` cases.

    Returns
    -------
    dict of str to str
        ``case_id -> status``, one of :data:`STATUSES`, in suite order.
    """
    if set_name not in SETS:
        raise ValueError(f"unknown set {set_name!r}; expected one of {sorted(SETS)}")
    runner = runner if runner is not None else SuiteRunner()
    formats, draft = SETS[set_name][1], SETS[set_name][2]
    statuses: dict[str, str] = {}
    for group in load_groups(set_name, data_dir):
        if group.needs_remote:
            outcome: tuple[str, Any] = ("unsupported", "needs remote documents")
        else:
            outcome = runner.compile(group.schema, formats, draft)
        for case in group.cases:
            status, note = outcome[0], outcome[1]
            if status == "ok":
                note = ""
                try:
                    accepted = runner.accepts(outcome[1], case.text)
                    status = "pass" if accepted == case.valid else "false_negative"
                    if accepted and not case.valid:
                        status = "false_positive"
                except Exception as exc:  # recorded as a crash, with type and message
                    status, note = "crash", f"{type(exc).__name__}: {exc}"
            statuses[case.case_id] = status
            if details is not None:
                details[case.case_id] = case.description + (f" :: {note}" if note else "")
    return statuses


# --------------------------------------------------------------------------------------------
# Baseline file and report
# --------------------------------------------------------------------------------------------


def load_baseline(path: Path = BASELINE) -> dict[str, str]:
    """Return ``case_id -> status`` from the committed baseline.

    Parameters
    ----------
    path : Path, optional
        The baseline file.

    Returns
    -------
    dict of str to str
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    return {case_id: entry["status"] for case_id, entry in data["cases"].items()}


def write_baseline(
    statuses: dict[str, str], details: dict[str, str], path: Path = BASELINE
) -> None:
    """Write the baseline: per-set counts, then one line per case (status and description).

    Parameters
    ----------
    statuses : dict of str to str
        ``case_id -> status`` for every set.
    details : dict of str to str
        ``case_id -> description`` (error texts after ``" :: "`` are cut off).
    path : Path, optional
        The baseline file.
    """
    counts = {name: dict(c) for name, c in count_by_set(statuses).items()}
    lines = [
        "{",
        '  "about": "JSON-Schema-Test-Suite statuses of constrain; rewrite with '
        '`python benchmarks/json_schema_suite.py --update-baseline`",',
        f'  "options": {json.dumps(SCHEMA_OPTIONS)},',
        f'  "counts": {json.dumps(counts)},',
        '  "cases": {',
    ]
    entries = []
    for case_id, status in statuses.items():
        desc = details.get(case_id, "").split(" :: ")[0]
        entry = json.dumps({"status": status, "description": desc}, ensure_ascii=False)
        entries.append(f"    {json.dumps(case_id)}: {entry}")
    lines.append(",\n".join(entries))
    lines += ["  }", "}", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


def count_by_set(statuses: dict[str, str]) -> dict[str, Counter[str]]:
    """Return status counts per set (the first component of each case id)."""
    out: dict[str, Counter[str]] = {}
    for case_id, status in statuses.items():
        out.setdefault(case_id.split("/", 1)[0], Counter())[status] += 1
    return out


def count_by_file(statuses: dict[str, str]) -> dict[str, Counter[str]]:
    """Return status counts per ``<set>/<file>``."""
    out: dict[str, Counter[str]] = {}
    for case_id, status in statuses.items():
        out.setdefault(case_id.rsplit("/", 2)[0], Counter())[status] += 1
    return out


_ABBREV = {
    "pass": "pass",
    "false_positive": "fp",
    "false_negative": "fn",
    "compile_error": "comp_err",
    "limit": "limit",
    "unsupported": "unsup",
    "crash": "crash",
}


def format_table(counts: dict[str, Counter[str]], title: str) -> str:
    """Return a fixed-width table of status counts and pass % per row."""
    width = max([len(title), *(len(k) for k in counts)])
    head = f"{title:<{width}}  " + " ".join(f"{_ABBREV[s]:>8}" for s in STATUSES)
    lines = [head + f" {'total':>6} {'pass%':>6}", "-" * (len(head) + 14)]
    for key, c in counts.items():
        total = sum(c.values())
        cells = " ".join(f"{c.get(s, 0):>8}" for s in STATUSES)
        lines.append(f"{key:<{width}}  {cells} {total:>6} {100.0 * c['pass'] / total:>6.1f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sets, print the tables, optionally rewrite the baseline; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help="comma list of case sets")
    parser.add_argument("--update-baseline", action="store_true", help=f"rewrite {BASELINE}")
    parser.add_argument("--no-files", action="store_true", help="omit the per-file table")
    parser.add_argument("--show", default="", help="comma list of statuses whose cases to list")
    parser.add_argument(
        "--out",
        type=Path,
        default=result_path("json-schema-suite"),
        help="status counts per set and file (default benchmarks/results/json-schema-suite.json)",
    )
    args = parser.parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    unknown = sorted(set(names) - set(SETS))
    if unknown:
        parser.error(f"unknown sets {unknown}; expected some of {list(SETS)}")
    if args.update_baseline and names != list(SETS):
        parser.error("--update-baseline needs every set")

    t0 = time.perf_counter()
    runner = SuiteRunner()
    t_setup = time.perf_counter() - t0
    statuses: dict[str, str] = {}
    details: dict[str, str] = {}
    for name in names:
        t1 = time.perf_counter()
        statuses.update(run_suite(name, runner=runner, details=details))
        print(f"{name}: {time.perf_counter() - t1:.1f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - t0

    print(format_table(count_by_set(statuses), "set"))
    if not args.no_files:
        print()
        print(format_table(count_by_file(statuses), "set/file"))
    for status in [s for s in args.show.split(",") if s]:
        print(f"\n{status}:")
        for case_id, st in statuses.items():
            if st == status:
                print(f"  {case_id}: {details[case_id]}"[:300])
    print(
        f"\n{len(statuses)} cases, {len(runner.cache)} schemas compiled; {elapsed:.1f} s "
        f"(setup {t_setup:.1f} s, compile {runner.compile_s:.1f} s, match {runner.match_s:.1f} s)"
    )
    counts = {"sets": count_by_set(statuses), "files": count_by_file(statuses)}
    record = {"machine": machine(), "options": SCHEMA_OPTIONS, "n_cases": len(statuses)}
    record |= {key: {k: dict(c) for k, c in table.items()} for key, table in counts.items()}
    print(f"wrote {shown(write_result(args.out, record))}")
    if args.update_baseline:
        write_baseline(statuses, details)
        print(f"wrote {BASELINE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
