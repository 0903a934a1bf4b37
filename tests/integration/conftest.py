"""Fixtures shared by the integration tests on the real default model (SmolLM2-135M-Instruct).

- ``_one_torch_thread`` (session, autouse): torch runs on one intra-op thread while these tests
  run, and the previous thread count is restored at the end of the session.
- ``model`` (session): the default model, loaded once per test session; skipped when it is not
  installed (a failure under ``CI=true``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

from constrain import generation
from constrain.integrations.transformers import Model, ModelNotFoundError


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    # On a small shared machine torch's intra-op threads mostly contend with each other (and
    # with the mask worker thread); one thread keeps the run time of these tests steady.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def model() -> Model:
    """The embedded default model, loaded once per process (shared with tests/test_docs.py)."""
    try:
        return generation.default_model()
    except ModelNotFoundError as err:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(err))
        pytest.skip(str(err))
