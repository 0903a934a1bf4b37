"""JSON-Schema-Test-Suite ratchet: no false positive, no crash, no regression from the baseline.

The runner is ``benchmarks/json_schema_suite.py`` (loaded from its path: ``benchmarks/`` is not a
package); the committed statuses are ``tests/conformance/json_schema_suite_baseline.json``. A
case that passed in the baseline must still pass; cases that now pass but did not are reported
with the command that rewrites the baseline.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER_PATH = ROOT / "benchmarks" / "json_schema_suite.py"
UPDATE_HINT = "python benchmarks/json_schema_suite.py --update-baseline"
MAX_LISTED = 40

pytestmark = pytest.mark.conformance


def _load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("json_schema_suite", RUNNER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


suite = _load_runner()


@pytest.fixture(scope="session")
def suite_runner(llama_vocab: Any) -> Any:
    """One compiler (Llama 3.2 vocabulary), tokenizer and compile cache for every set."""
    import constrain

    return suite.SuiteRunner(compiler=constrain.Compiler(llama_vocab))


@pytest.fixture(scope="session")
def baseline() -> dict[str, str]:
    if not suite.BASELINE.is_file():
        pytest.fail(f"{suite.BASELINE} is missing; create it with `{UPDATE_HINT}`")
    statuses: dict[str, str] = suite.load_baseline()
    return statuses


def _listing(case_ids: list[str], statuses: dict[str, str], details: dict[str, str]) -> str:
    lines = [
        f"  {cid} [{statuses.get(cid, '-')}]: {details.get(cid, '')}"[:240] for cid in case_ids
    ]
    if len(lines) > MAX_LISTED:
        lines = [*lines[:MAX_LISTED], f"  ... and {len(lines) - MAX_LISTED} more"]
    return "\n".join(lines)


@pytest.mark.parametrize("set_name", list(suite.SETS))
def test_json_schema_suite(
    set_name: str, data_dir: Path, suite_runner: Any, baseline: dict[str, str]
) -> None:
    details: dict[str, str] = {}
    statuses: dict[str, str] = suite.run_suite(
        set_name, data_dir=data_dir, runner=suite_runner, details=details
    )
    assert len(statuses) > 0

    bad = [cid for cid, st in statuses.items() if st in ("false_positive", "crash")]
    assert not bad, f"{len(bad)} false positives / crashes in {set_name}:\n" + _listing(
        bad, statuses, details
    )

    expected = {cid: st for cid, st in baseline.items() if cid.split("/", 1)[0] == set_name}
    missing = sorted(set(expected) - set(statuses))
    assert not missing, (
        f"{len(missing)} baseline cases of {set_name} are no longer in the suite data "
        f"(data changed?); rewrite the baseline with `{UPDATE_HINT}`:\n"
        + _listing(missing, statuses, details)
    )
    regressed = [cid for cid, st in expected.items() if st == "pass" and statuses[cid] != "pass"]
    assert not regressed, (
        f"{len(regressed)} cases of {set_name} passed in the baseline and now fail:\n"
        + _listing(regressed, statuses, details)
    )

    improved = [cid for cid, st in statuses.items() if st == "pass" and expected.get(cid) != "pass"]
    changed = [cid for cid, st in statuses.items() if st != "pass" and expected.get(cid, st) != st]
    if improved or changed:
        warnings.warn(
            f"{set_name}: {len(improved)} cases now pass that did not in the baseline "
            f"({len(changed)} other status changes); update it with `{UPDATE_HINT}`",
            stacklevel=1,
        )


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"$ref": "http://localhost:1234/draft2020-12/integer.json"}, True),
        ({"$schema": "http://localhost:1234/draft2020-12/metaschema.json"}, True),
        ({"$id": "http://localhost:1234/root", "$ref": "item.json"}, True),
        (
            {
                "$id": "http://localhost:1234/root",
                "$ref": "item.json",
                "$defs": {"item": {"$id": "item.json", "type": "integer"}},
            },
            False,
        ),
        ({"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}}, False),
        ({"$schema": "https://json-schema.org/draft/2020-12/schema"}, False),
        ({"enum": [{"$ref": "http://localhost:1234/x.json"}]}, True),  # over-approximation
    ],
)
def test_needs_remote(schema: dict[str, Any], expected: bool) -> None:
    assert suite.needs_remote(schema) is expected


def test_serialise_is_compact_utf8() -> None:
    assert suite.serialise({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    assert suite.serialise("\ud800") == '"\\ud800"'  # a lone surrogate stays escaped
