"""Shared fixtures: data sets, vocabularies, seeded RNG."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

try:
    from hypothesis import settings
except ImportError:  # a lent GPU machine runs the kernel tests without the test extras
    settings = None

# Every property test draws the same examples on every run (fixed seeds, no example database):
# the suite's cost and outcome do not depend on luck. A random draw once made hypothesis's own
# regex strategy build case-folded character classes for 20 minutes. `make fuzz` seeds its own.
if settings is not None:
    settings.register_profile("constrain", derandomize=True, database=None)
    settings.load_profile("constrain")

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--force-lazy",
        action="store_true",
        help="build every non-greedy grammar's lexer lazily (constrain.automata.lazy_lexer), "
        "counted repetitions of 8 copies or more folded: the tests then check the lazy build",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--force-lazy"):
        from constrain.automata import lazy_lexer

        lazy_lexer.FORCE = 8


def _data_dir() -> Path | None:
    env = os.environ.get("CONSTRAIN_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "data")
    for cand in candidates:
        if cand.is_dir():
            return cand
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared data folder ($CONSTRAIN_DATA, else ../shared/data); a failure under CI=true."""
    found = _data_dir()
    if found is None:
        msg = "shared data not found: set CONSTRAIN_DATA or provide ../shared/data"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return found


@pytest.fixture(scope="session")
def byte_vocab():  # type: ignore[no-untyped-def]
    from constrain.testing import byte_vocabulary

    return byte_vocabulary()


@pytest.fixture(scope="session")
def tiny_vocab():  # type: ignore[no-untyped-def]
    from constrain.testing import tiny_vocabulary

    return tiny_vocabulary()


@pytest.fixture(scope="session")
def llama_vocab():  # type: ignore[no-untyped-def]
    from constrain.testing import llama3_vocabulary

    return llama3_vocabulary()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
