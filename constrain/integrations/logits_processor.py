"""A transformers ``LogitsProcessor`` that constrains ``model.generate`` with a compiled grammar.

>>> processor = LogitsProcessor(compiled, batch_size=len(prompts))  # doctest: +SKIP
>>> model.generate(**inputs, logits_processor=[processor])  # doctest: +SKIP
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor as _HFLogitsProcessor

from constrain.bitmask import BitmaskApplier, allocate_token_bitmask
from constrain.compiler import CompiledGrammar
from constrain.errors import MatcherStateError
from constrain.matcher import Matcher, fill_next_token_bitmasks

__all__ = ["LogitsProcessor"]


class LogitsProcessor(_HFLogitsProcessor):  # type: ignore[misc]
    """Constrain ``model.generate`` with a compiled grammar: one matcher per batch row.

    >>> processor = LogitsProcessor(compiled, batch_size=len(prompts))  # doctest: +SKIP
    >>> model.generate(**inputs, logits_processor=[processor], max_new_tokens=256)  # doctest: +SKIP

    At each step the processor advances every row's matcher by the token ``generate`` appended,
    fills the rows' bitmasks (in parallel threads) and masks the scores in place. EOS is
    allowed exactly when a row's output is complete; after a row's EOS only EOS (the pad that
    ``generate`` appends) stays allowed, so sampling never sees an all ``-inf`` row. Padded
    vocabularies (scores wider than the tokenizer) get their tail masked.

    Parameters
    ----------
    compiled : CompiledGrammar
        From ``Compiler(vocab).compile(grammar)``, for the model's vocabulary.
    batch_size : int, optional
        Rows of ``input_ids`` (prompts times ``num_return_sequences``). Beam search is not
        supported.
    backend : str, optional
        Kernel of :func:`constrain.apply_token_bitmask_inplace`.

    Raises
    ------
    ValueError
        If ``batch_size < 1`` or ``backend`` is not a backend name.

    Notes
    -----
    A processor holds per-row state: call :meth:`reset` (or make a new one) before reusing it
    for another ``generate`` call. The batch size is fixed: a call with another number of rows
    raises ``ValueError`` and leaves the processor as it was.

    The bitmask buffer, its numpy view and the backend are set up once, here; a step on the
    CPU then costs the matchers' work plus one call of the numba kernel (see ``BitmaskApplier``
    in :mod:`constrain.bitmask`).
    """

    def __init__(
        self, compiled: CompiledGrammar, batch_size: int = 1, *, backend: str = "auto"
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.compiled = compiled
        self.batch_size = batch_size
        self.backend = backend
        self.matchers = [Matcher(compiled) for _ in range(batch_size)]
        self.bitmask = allocate_token_bitmask(
            batch_size, compiled.vocab.size, pin_memory=torch.cuda.is_available()
        )
        self._applier = BitmaskApplier(self.bitmask, compiled.vocab.size, backend)
        self._prompt_len: int | None = None
        self._last_len = 0

    def reset(self) -> None:
        """Forget the previous ``generate`` call."""
        for m in self.matchers:
            m.reset()
        self._prompt_len = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Mask ``scores`` (B, C) in place for the next token after ``input_ids`` (B, L).

        Raises
        ------
        ValueError
            If the rows are not ``batch_size`` or ``scores`` is not ``(batch, vocab)``.
        MatcherStateError
            If the processor was used by an earlier call (not :meth:`reset`), or ``generate``
            appended a token the row's grammar does not allow.
        """
        rows = input_ids.shape[0]
        if rows != self.batch_size:
            raise ValueError(
                f"LogitsProcessor was built for batch_size={self.batch_size} but generate() "
                f"passed {rows} rows; build it with batch_size={rows} (prompts times "
                "num_return_sequences; beam search is not supported)"
            )
        if scores.dim() != 2 or scores.shape[0] != rows:
            raise ValueError(
                f"scores must be (batch, vocab) with one row per row of input_ids ({rows}), "
                f"got shape {tuple(scores.shape)}"
            )
        length = input_ids.shape[1]
        if self._prompt_len is None:
            self._prompt_len = length
        elif length != self._last_len + 1:
            raise MatcherStateError(
                "this LogitsProcessor was used by an earlier generate() call; call reset() "
                "or build a new one"
            )
        else:
            last = input_ids[:, -1].tolist()
            for i, (m, token) in enumerate(zip(self.matchers, last, strict=True)):
                if not m.is_terminated() and not m.accept_token(token):
                    raise MatcherStateError(
                        f"row {i}: generate() appended token {token}, which the grammar "
                        "does not allow (another logits processor or a forced token overrode "
                        "the mask?)"
                    )
        self._last_len = length
        fill_next_token_bitmasks(self.matchers, self.bitmask)
        self._applier.apply(scores)
        return scores
