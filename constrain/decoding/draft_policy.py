"""The adaptive draft length of speculative decoding (:mod:`constrain.decoding.speculative`).

It decides how many tokens each drafter may propose from measured costs and running acceptance
rates. It changes the speed only: verification draws every token from the row's own random
stream, so the output does not depend on what the policy decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from constrain.decoding.drafters import Drafter

__all__ = ["PER_TOKEN", "PROBE_EVERY", "RATE_DECAY", "START_GUESS", "DraftPolicy"]

RATE_DECAY = 0.1
"""Weight of the newest verification outcome in a drafter's running acceptance rate."""


START_GUESS = 0.5
"""Extra cost of a multi-position pass before one of each kind has been timed."""
PER_TOKEN = 0.03
"""Cost of one more position in a multi-position pass (measured 0.01-0.05 on the CPU)."""
PROBE_EVERY = 16
"""A drafter switched off for a low acceptance rate drafts one token this often, to re-measure."""


class DraftPolicy:
    """How many tokens each drafter may draft: the adaptive draft length.

    Costs are in target forward passes of one position. A pass over ``T >= 2`` positions costs
    ``1 + start`` (``start`` is measured: the running ratio of multi-position to one-position
    pass times, minus 1; on this project's 2-core CPU about 0.6-0.9, on a GPU near 0), and each
    further position ``PER_TOKEN``. A drafter whose running acceptance rate is ``a`` has its
    ``j``-th token accepted with probability about ``a ** j``. So it may start a row's draft
    when the expected accepted run ``a / (1 - a)`` exceeds ``start`` plus its own drafting cost,
    extend one when ``a`` exceeds ``PER_TOKEN`` plus its own cost per token, and drafts up to
    ``log(PER_TOKEN) / log(a)`` tokens (where ``a ** j`` stops paying for a position). A drafter
    switched off is probed with one token now and then, to re-measure ``a``. Rates start at the
    drafter's ``prior`` (grammar 0.9, lookup 0.5, early exit 0.2).
    """

    def __init__(self, drafters: Sequence[Drafter], max_draft: int) -> None:
        self.rates = {d.name: float(getattr(d, "prior", 0.5)) for d in drafters}
        self.own = {d.name: float(getattr(d, "cost", 0.0)) for d in drafters}
        self.max_draft = max_draft
        self.iteration = 0
        self.one = 0.0  # running seconds of a one-position pass
        self.many = 0.0  # ... and of a multi-position pass

    @property
    def start(self) -> float:
        """The measured extra cost of a multi-position pass, in one-position passes."""
        if self.one <= 0.0 or self.many <= 0.0:
            return START_GUESS
        return max(0.0, self.many / self.one - 1.0)

    def timed(self, width: int, seconds: float) -> None:
        """Record the wall time of a forward pass over ``width`` positions."""
        if width == 1:
            self.one = seconds if self.one == 0.0 else 0.8 * self.one + 0.2 * seconds
        else:
            self.many = seconds if self.many == 0.0 else 0.8 * self.many + 0.2 * seconds

    def outcome(self, source: str, accepted: bool) -> None:
        """Record whether a token drafted by ``source`` was accepted."""
        rate = self.rates.get(source, 0.5)
        self.rates[source] = (1 - RATE_DECAY) * rate + RATE_DECAY * accepted

    def __call__(self, row: int, source: str, drafted: int) -> int:
        """Return how many tokens ``source`` may draft for ``row`` after ``drafted`` so far."""
        a = min(self.rates.get(source, 0.5), 0.97)
        own = self.own.get(source, 0.0)
        run = a / (1.0 - a)
        worth = run > self.start + own if drafted == 0 else a > PER_TOKEN + own
        if not worth:
            period = int(PROBE_EVERY * (1.0 + 4.0 * own))
            return 1 if self.iteration % period == 0 else 0
        if a <= PER_TOKEN:
            return 1
        return max(1, min(self.max_draft, int(math.log(PER_TOKEN) / math.log(a))))
