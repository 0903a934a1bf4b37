r"""vLLM with ``--reasoning-parser``: free reasoning, then the request's constraint.

Stage 6 (masking) inside a serving engine, worker side. On a vLLM server started with a
reasoning parser (``--reasoning-parser deepseek_r1``, ``qwen3``, ...) vLLM's own structured-output
backends leave the reasoning free and start the grammar after the parser's end marker. constrain
does the same through its grammar, so the boundary is exact token by token: a constrained
request's spec gets a ``"reasoning"`` entry and its grammar becomes
:func:`constrain.reasoning.reasoning_grammar` of the constraint::

    {"json_schema": {...}, "reasoning": {"start": "<think>", "end": "</think>", "opened": false}}

``start`` and ``end`` are the parser's ``reasoning_start_str`` / ``reasoning_end_str``;
``opened`` says the prompt already ends inside an open block (DeepSeek-R1's template writes
``<think>\n`` after the assistant header), so the output starts with reasoning, not the start
marker. A prompt that closes an empty block (Qwen3 with ``enable_thinking=False``) gets no
reasoning entry: the constraint starts at once, as vLLM's reasoning parsers read it. The
optional ``max_chars`` is a thinking budget in characters (the end marker is forced after it).
A request may also send the entry itself in its spec (``vllm_xargs``); it is then kept as sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from constrain.reasoning import Reasoning, ReasoningPlan, plan_reasoning

__all__ = ["REASONING_KEY", "prompt_reasoning", "reasoning_plan", "server_reasoning"]

REASONING_KEY = "reasoning"
"""The spec key of the reasoning block (see the module docstring)."""

_TAIL_TOKENS = 8  # prompt tokens decoded to see whether the template opened the block
_LOG = logging.getLogger(__name__)


def reasoning_plan(value: Any) -> ReasoningPlan:
    """Return the plan of a spec's ``"reasoning"`` entry.

    Parameters
    ----------
    value : mapping
        ``{"start": str, "end": str, "opened": bool, "max_chars": int or None}``; every key is
        optional (defaults ``<think>``, ``</think>``, false, none).

    Returns
    -------
    ReasoningPlan
        A required block (not optional), opened by the prompt when ``opened``.

    Raises
    ------
    ValueError
        If the entry is not such an object or its values have the wrong types.
    """
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{REASONING_KEY} must be an object such as "
            f'{{"start": "<think>", "end": "</think>"}}, got {type(value).__name__}'
        )
    unknown = sorted(set(value) - {"start", "end", "opened", "max_chars"})
    if unknown:
        raise ValueError(f"{REASONING_KEY}: unknown keys {', '.join(unknown)}")
    start = value.get("start", "<think>")
    end = value.get("end", "</think>")
    opened = value.get("opened", False)
    if not isinstance(start, str) or not isinstance(end, str) or not isinstance(opened, bool):
        raise ValueError(f"{REASONING_KEY}: start and end are strings, opened a boolean")
    try:
        spec = Reasoning(start, end, max_chars=value.get("max_chars"))
    except TypeError as err:
        raise ValueError(f"{REASONING_KEY}: {err}") from err
    return ReasoningPlan(spec, opened=opened, optional=False)


def server_reasoning(vllm_config: Any, tokenizer: Any) -> Reasoning | None:
    """Return the reasoning markers of a vLLM engine, or None without a reasoning parser.

    Parameters
    ----------
    vllm_config : vllm.config.VllmConfig
        The engine's configuration; ``structured_outputs_config.reasoning_parser`` names the
        parser (``--reasoning-parser``), ``enable_in_reasoning`` constrains from the first token
        (then None is returned, as vLLM's backends do).
    tokenizer : tokenizer
        The engine's tokenizer (the parser is built with it to read its markers).

    Returns
    -------
    Reasoning or None
        The parser's ``reasoning_start_str`` and ``reasoning_end_str``; None when the engine
        has no reasoning parser, or one without such a pair of strings (logged).
    """
    config = getattr(vllm_config, "structured_outputs_config", None)
    name = getattr(config, "reasoning_parser", "") if config is not None else ""
    if not name or getattr(config, "enable_in_reasoning", False):
        return None
    from vllm.reasoning import ReasoningParserManager

    try:
        parser = ReasoningParserManager.get_reasoning_parser(name)(tokenizer)
        start, end = parser.reasoning_start_str, parser.reasoning_end_str
    except Exception:  # a parser this model cannot build: vLLM reports it on its own
        _LOG.exception("constrain: cannot read the markers of reasoning parser %r", name)
        return None
    if not isinstance(start, str) or not isinstance(end, str) or not start or not end:
        _LOG.warning(
            "constrain: reasoning parser %r has no start/end strings; constrained requests are "
            "constrained from their first token",
            name,
        )
        return None
    return Reasoning(start, end)


def prompt_reasoning(
    reasoning: Reasoning, tokenizer: Any, prompt_ids: Sequence[int] | None
) -> dict[str, Any] | None:
    """Return the ``"reasoning"`` spec entry of one request, or None when it expects none.

    Parameters
    ----------
    reasoning : Reasoning
        The engine's markers (:func:`server_reasoning`).
    tokenizer : tokenizer
        Decodes the prompt's last tokens.
    prompt_ids : sequence of int, optional
        The request's prompt token ids (None: not known, the block is taken as not opened).

    Returns
    -------
    dict or None
        ``{"start", "end", "opened"}``; None when the prompt closes an empty block.
    """
    tail = ""
    if prompt_ids:
        ids = [int(t) for t in list(prompt_ids)[-_TAIL_TOKENS:]]
        tail = str(tokenizer.decode(ids, skip_special_tokens=False))
    plan = plan_reasoning(reasoning, None, [tail])
    if plan is None:
        return None
    return {"start": reasoning.start, "end": reasoning.end, "opened": plan.opened}
