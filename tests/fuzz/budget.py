"""The fuzz suite's budget: hypothesis settings read from the environment.

``CONSTRAIN_FUZZ_EXAMPLES`` is the number of examples per fuzz target (default 15: the whole
``tests/fuzz`` folder runs in well under a minute on 2 cores, as part of ``make test``), and
``CONSTRAIN_FUZZ_SEED`` switches derandomisation off (default on, so CI runs are reproducible);
``make fuzz`` sets a budget of 1,500 examples per target and passes a fresh seed both there and
to pytest's ``--hypothesis-seed``, printing it so a failure can be replayed.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("CONSTRAIN_FUZZ_EXAMPLES", "15"))
SEEDED = "CONSTRAIN_FUZZ_SEED" in os.environ


def fuzz_settings(weight: float = 1.0) -> settings:
    """Settings for one fuzz target; ``weight`` scales the example budget (costly targets < 1)."""
    return settings(
        max_examples=max(1, int(EXAMPLES * weight)),
        deadline=None,
        derandomize=not SEEDED,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=True,
    )
