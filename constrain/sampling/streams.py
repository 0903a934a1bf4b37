"""Counter-based random streams: one per request (or particle, or draft), keyed, not shared.

A seeded ``torch.Generator`` shared by a batch makes each row's draws depend on its neighbours
(how many rows draw before it, and how much) and on anything that changes the number of draws
(an adaptive draft length timed by the clock). :class:`RandomStreams` gives every row its own
stream instead: draw ``n`` of a row is a function of the row's key and ``n`` alone, computed by
seeding a generator with a hash of the two. So a row draws the same numbers alone or in any
batch, in any thread, however the loop around it is scheduled, as long as it asks for its
``n``-th draw at the same point of its own decoding (the token loops draw once per output
position).

``generate(prompts, seed=s)`` gives request ``k`` of a batch the key ``s + k``: the same output
as ``generate(prompts[k], seed=s + k)`` where the model's batched arithmetic equals its
unbatched one (``docs/sampling.md``, "Reproducibility").
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import torch

__all__ = ["RandomStreams", "Randomness", "draw_uniform"]

_MASK64 = (1 << 64) - 1


def _mix(*parts: int) -> int:
    """Hash integers to a 63-bit seed (BLAKE2b: no structure shared by nearby keys)."""
    data = b"".join((p & _MASK64).to_bytes(8, "little") for p in parts)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") >> 1


class RandomStreams:
    """Independent random streams, one per row; draw ``n`` of a row depends on its key and ``n``.

    Parameters
    ----------
    keys : sequence of int
        One key per row (any integers; equal keys give equal streams).
    device : torch.device or str, optional
        Where the draws are made and returned (a CUDA generator draws other numbers than a
        CPU one for the same key).

    Examples
    --------
    >>> streams = RandomStreams.for_requests(seed=7, n=3)
    >>> a = streams.uniform(4)                      # (3, 4): one draw of every row
    >>> b = RandomStreams.for_requests(8, 2).uniform(4)
    >>> bool((a[1:] == b).all())                    # rows 1, 2 are requests keyed 8 and 9
    True
    """

    def __init__(self, keys: Sequence[int], device: torch.device | str = "cpu") -> None:
        self._keys = [int(k) for k in keys]
        self._counts = [0] * len(self._keys)
        self._index = list(range(len(self._keys)))
        self.device = torch.device(device)
        self._generator = torch.Generator(device=self.device)

    @classmethod
    def for_requests(cls, seed: int, n: int, device: torch.device | str = "cpu") -> RandomStreams:
        """Return the streams of ``n`` requests: request ``k`` has the key ``seed + k``."""
        return cls([seed + k for k in range(n)], device)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        keys = [self._keys[i] for i in self._index]
        return f"RandomStreams(keys={keys}, device={str(self.device)!r})"

    def rows(self, rows: Sequence[int]) -> RandomStreams:
        """Return a view of some rows: drawing from the view advances these rows' streams.

        Raises
        ------
        IndexError
            For a row out of range.
        """
        view = RandomStreams.__new__(RandomStreams)
        view._keys = self._keys
        view._counts = self._counts
        view._index = [self._index[r] for r in rows]
        view.device = self.device
        view._generator = self._generator
        return view

    def spawn(self, n: int) -> RandomStreams:
        """Return ``len(self) * n`` new streams: row ``r * n + j`` is child ``j`` of row ``r``.

        The children (an SMC run's particles, a prompt's drafts) are independent of their
        parent and of each other, and do not advance the parent.
        """
        keys = [_mix(self._keys[i], -1, j) for i in self._index for j in range(n)]
        return RandomStreams(keys, self.device)

    def uniform(self, width: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Draw ``width`` uniforms in ``[0, 1)`` from every row: ``(len(self), width)``.

        Each row's draw is its next one (its counter advances by one, whatever ``width``).
        """
        out = torch.empty((len(self._index), width), dtype=dtype, device=self.device)
        for r, i in enumerate(self._index):
            self._generator.manual_seed(_mix(self._keys[i], self._counts[i]))
            self._counts[i] += 1
            torch.rand((width,), generator=self._generator, dtype=dtype, out=out[r])
        return out


Randomness = torch.Generator | RandomStreams | None
"""What a sampler draws from: a shared generator, per-row streams, or torch's default."""


def draw_uniform(
    shape: Sequence[int],
    generator: Randomness,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Draw uniforms in ``[0, 1)`` of ``shape`` from a generator or from per-row streams.

    With :class:`RandomStreams`, the leading axis has one entry per stream (each stream makes
    one draw of the rest of the shape), or, with a single stream, the whole shape is its one
    draw.

    Parameters
    ----------
    shape : sequence of int
        The shape of the result.
    generator : torch.Generator, RandomStreams or None
        ``None`` draws from torch's default generator.
    device : torch.device or str, optional
        Where the result goes (default: the generator's device, else the CPU).
    dtype : torch.dtype, optional
        A floating dtype (default float64).

    Returns
    -------
    torch.Tensor

    Raises
    ------
    ValueError
        If the streams do not match the leading axis of ``shape``.
    """
    shape = tuple(int(d) for d in shape)
    if isinstance(generator, RandomStreams):
        if len(generator) == 1:
            u = generator.uniform(math.prod(shape), dtype).view(shape)
        elif len(shape) >= 1 and shape[0] == len(generator):
            u = generator.uniform(math.prod(shape[1:]), dtype).view(shape)
        else:
            raise ValueError(
                f"{len(generator)} random streams cannot draw shape {shape}: the leading axis "
                "needs one entry per stream"
            )
        return u if device is None else u.to(device)
    where = device if device is not None else (generator.device if generator else "cpu")
    return torch.rand(shape, generator=generator, dtype=dtype, device=where)
