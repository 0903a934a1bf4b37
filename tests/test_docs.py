"""Every Python and shell block of README.md and docs/*.md runs as written, or says why not.

A block preceded by ``<!-- not run: REASON -->`` (on the line before its fence) is skipped with
that reason; every other ``python``, ``bash`` or ``sh`` block runs. A file's Python blocks run
in order in one namespace (a module named after the file), on the embedded default model
where they generate (``constrain.generation.default_model()``, loaded once per process and
shared with the generation tests). A shell block runs line by line; each command must be
``python -m constrain ...`` or ``constrain-llm ...``, run in-process by
:func:`constrain.cli.main` (so it shares the loaded model too) from the repository root. It
must exit with 0, or with N when its comment says ``(exit N)``.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python": "python", "bash": "shell", "sh": "shell", "shell": "shell"}
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->$")
EXIT = re.compile(r"\(exit (\d+)\)")
CLI_PREFIXES = (["python", "-m", "constrain"], ["constrain-llm"])


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int
    kind: str
    code: str
    not_run: str | None


def blocks(path: Path) -> list[Block]:
    """Return the Python and shell blocks of ``path`` in order."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        language = lines[i][3:].strip() if lines[i].startswith("```") else ""
        if language not in LANGUAGES:
            i += 1
            continue
        start = i
        i += 1
        while not lines[i].startswith("```"):
            i += 1
        before = next((x.strip() for x in reversed(lines[:start]) if x.strip()), "")
        reason = NOT_RUN.match(before)
        code = "\n".join(lines[start + 1 : i]) + "\n"
        found.append(Block(path, start + 1, LANGUAGES[language], code, reason and reason["reason"]))
        i += 1
    return found


def commands(code: str) -> Iterator[tuple[list[str], int]]:
    """Yield each command of a shell block (continuation lines joined) and its exit status."""
    for line in code.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        comment = line.partition(" # ")[2]
        expected = EXIT.search(comment)
        yield shlex.split(line, comments=True), int(expected[1]) if expected else 0


ALL_BLOCKS = [b for path in DOCS for b in blocks(path)]
RUN_FILES = sorted({b.path for b in ALL_BLOCKS if b.not_run is None})


def test_the_docs_have_blocks_run_and_skipped_with_reasons() -> None:
    run = [b for b in ALL_BLOCKS if b.not_run is None]
    skipped = [b for b in ALL_BLOCKS if b.not_run is not None]
    assert len(run) >= 10 and skipped
    assert all(b.not_run and len(b.not_run) > 10 for b in skipped)
    for block in run:
        if block.kind == "shell":
            for argv, _ in commands(block.code):
                assert any(argv[: len(p)] == p for p in CLI_PREFIXES), (
                    f"{block.path.name}:{block.line}: {shlex.join(argv)!r} is not a constrain "
                    "command; mark the block <!-- not run: REASON -->"
                )


@pytest.fixture(scope="module")
def _default_model() -> Iterator[None]:
    """The default model, loaded once; torch on one thread (as the generation tests)."""
    import torch

    from constrain import generation
    from constrain.integrations.transformers import ModelNotFoundError

    try:
        generation.default_model()
    except ModelNotFoundError as err:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(err))
        pytest.skip(str(err))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("path", RUN_FILES, ids=[p.name for p in RUN_FILES])
def test_the_blocks_of_a_file_run_in_order(
    path: Path,
    _default_model: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from constrain.cli import main

    monkeypatch.chdir(ROOT)
    name = "docs_" + re.sub(r"\W", "_", path.stem)
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)  # pydantic resolves annotations through it
    for block in blocks(path):
        if block.not_run is not None:
            continue
        where = f"{path.name}:{block.line}"
        if block.kind == "python":
            exec(compile(block.code, where, "exec"), module.__dict__)  # noqa: S102
            continue
        for argv, expected in commands(block.code):
            prefix = next(p for p in CLI_PREFIXES if argv[: len(p)] == p)
            status = main(argv[len(prefix) :])
            assert status == expected, (where, argv, capsys.readouterr().err)
