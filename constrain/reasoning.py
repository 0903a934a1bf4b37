r"""Reasoning before the answer: free text between markers, then the constraint (stage 8).

A reasoning model thinks before it answers: ``<think> ... </think>`` and then the answer. With
``generate(..., reasoning=True)`` the grammar is the reasoning block followed by the constraint::

    start: REASONING answer          REASONING = "<think>" text "</think>" "\n"{0,2}

where *text* is any text in which the end marker does not occur (so the block ends at the first
``</think>``), optionally at most ``max_chars`` characters or ``max_tokens`` tokens: a thinking
budget, after which the grammar forces the end marker. A token budget is counted by the matcher
(:mod:`constrain.token_budgets`); the block's text is then a terminal of its own. The answer
is the constraint's own grammar, embedded whole (:func:`constrain.frontends.compose.splice`),
so masks stay exact across the boundary, and speculative decoding and jump-forward verify a
draft that crosses ``</think>`` token by token like any other.

When the chat template already opens the block in the prompt (DeepSeek-R1 writes ``<think>\n``
after the assistant header) the grammar starts inside it; when it closes an empty block there
(Qwen3 with thinking switched off) no reasoning is expected. ``reasoning=None`` turns it on for
a tokenizer whose chat template mentions the end marker, with the block optional (a reasoning
model may skip it).

The output is split back at the first end marker: :func:`split_reasoning` returns the reasoning
(without the markers) and the answer text, which the constraint's own parser reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from constrain.errors import GrammarError, OutputValidationError
from constrain.frontends.compose import ANY_TEXT, free_text, splice, until_first
from constrain.ir import (
    Alt,
    Complement,
    Concat,
    Grammar,
    Intersect,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
)
from constrain.output import OutputType

__all__ = [
    "Reasoning",
    "ReasoningPlan",
    "detect_reasoning",
    "plan_reasoning",
    "read_reasoning",
    "reasoning_grammar",
    "reasoning_output",
    "split_reasoning",
]

_ANSWER = "answer_"
_BLOCK = "REASONING"


@dataclass(frozen=True)
class Reasoning:
    r"""How a model marks its reasoning, and how much of it to allow.

    Parameters
    ----------
    start, end : str
        The markers around the reasoning (default ``<think>`` and ``</think>``, as DeepSeek-R1,
        Qwen3 and most open reasoning models write them). Matched as text: a tokenizer that has
        them as added tokens (Qwen3) writes each as one token.
    max_chars : int, optional
        A thinking budget: at most this many characters of reasoning, after which the end marker
        is forced. ``None`` (default): unbounded, the model ends its reasoning itself.
    max_tokens : int, optional
        A thinking budget in tokens: at most this many tokens start inside the reasoning (the
        one that opens it with its last bytes is not counted), then the end marker is forced.
        ``None`` (default): unbounded. Both budgets may be given.
    newlines : int, optional
        Line breaks allowed between the end marker and the answer (default 2, as models write
        ``</think>\n\n``).
    """

    start: str = "<think>"
    end: str = "</think>"
    max_chars: int | None = None
    newlines: int = 2
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if not self.start or not self.end:
            raise ValueError("Reasoning needs non-empty start and end markers")
        if self.end in self.start:
            raise ValueError(f"the end marker {self.end!r} occurs in the start marker")
        for name in ("max_chars", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int or None, got {value!r}")
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if isinstance(self.newlines, bool) or not isinstance(self.newlines, int):
            raise TypeError(f"newlines must be an int, got {self.newlines!r}")
        if self.newlines < 0:
            raise ValueError(f"newlines must be >= 0, got {self.newlines}")


@dataclass(frozen=True)
class ReasoningPlan:
    """What the grammar expects of one call: the markers, and where the prompt left them."""

    reasoning: Reasoning
    opened: bool
    """The prompt ends inside an open block: the output starts with reasoning, not the marker."""
    optional: bool
    """The block may be skipped (reasoning detected from the template, not asked for)."""


def detect_reasoning(chat_template: str | None, reasoning: Reasoning | None = None) -> bool:
    """Return whether a chat template is a reasoning model's (it mentions the end marker).

    Parameters
    ----------
    chat_template : str or None
        The tokenizer's chat template.
    reasoning : Reasoning, optional
        The markers (default ``<think>``/``</think>``).

    Returns
    -------
    bool
    """
    end = (reasoning or Reasoning()).end
    return bool(chat_template) and end in str(chat_template)


def plan_reasoning(
    setting: bool | Reasoning | None,
    chat_template: str | None,
    prompt_tails: Sequence[str],
) -> ReasoningPlan | None:
    """Decide the reasoning block of a call from ``generate``'s ``reasoning=`` and the prompts.

    Parameters
    ----------
    setting : bool, Reasoning or None
        ``generate``'s ``reasoning=``: ``True`` or a :class:`Reasoning` asks for a block,
        ``False`` for none, ``None`` decides from the chat template (an optional block).
    chat_template : str or None
        The tokenizer's chat template.
    prompt_tails : sequence of str
        The end of each prompt's text, chat template applied (the last few tokens decoded).

    Returns
    -------
    ReasoningPlan or None
        ``None``: no reasoning block.

    Raises
    ------
    TypeError
        If ``setting`` is of another type.
    ValueError
        If some prompts of a batch open the block and others do not (one grammar serves all).
    """
    if setting is False:
        return None
    if setting is None:
        if not detect_reasoning(chat_template):
            return None
        spec, optional = Reasoning(), True
    elif setting is True:
        spec, optional = Reasoning(), False
    elif isinstance(setting, Reasoning):
        spec, optional = setting, False
    else:
        raise TypeError(f"reasoning= must be a bool, a Reasoning or None, got {setting!r}")
    states = {_prompt_state(tail, spec) for tail in prompt_tails}
    if len(states) > 1:
        raise ValueError(
            "the prompts of this batch differ in whether the chat template opened the reasoning "
            f"block ({spec.start!r}); generate them in separate calls"
        )
    state = states.pop() if states else "none"
    if state == "closed":  # the template wrote an empty block: thinking is off
        return None
    return ReasoningPlan(spec, opened=state == "open", optional=optional and state != "open")


def _prompt_state(tail: str, spec: Reasoning) -> str:
    """``"open"``, ``"closed"`` or ``"none"``: how the prompt's text leaves the block."""
    text = tail.rstrip()
    if text.endswith(spec.end):
        return "closed"
    if text.endswith(spec.start):
        return "open"
    return "none"


def reasoning_grammar(answer: Grammar, plan: ReasoningPlan) -> Grammar:
    """Return the grammar of a reasoning block followed by a sentence of ``answer``.

    Parameters
    ----------
    answer : Grammar
        The constraint's grammar, embedded whole.
    plan : ReasoningPlan
        The markers, the budget, and whether the block is opened by the prompt or optional.

    Returns
    -------
    Grammar
        The composed grammar, normalised.
    """
    spec = plan.reasoning
    opening = () if plan.opened else (Literal(spec.start),)
    closing = (Repeat(Literal("\n"), 0, spec.newlines),) if spec.newlines else ()
    budgets: tuple[tuple[str, int], ...] = ()
    if spec.max_tokens is None:  # one lexeme, start marker to the line breaks after the end
        body = until_first(spec.end, [spec.end], [], spec.max_chars)
        terminals: tuple[Terminal, ...] = (Terminal(_BLOCK, Concat((*opening, body, *closing))),)
        block: tuple[str, ...] = (_BLOCK,)
    elif answer.greedy:  # longest match would never end the free text before the marker
        raise GrammarError(
            "Reasoning(max_tokens=...) needs an answer grammar without greedy lexing (%lexer "
            "basic): the reasoning text would be one longest lexeme; use max_chars instead"
        )
    else:  # the text is a lexeme of its own, whose tokens the matcher counts
        pieces: list[tuple[str, Regex]] = [(_BLOCK + "_OPEN", opening[0])] if opening else []
        if spec.max_tokens:
            pieces.append((_BLOCK + "_TEXT", _text_before(spec.end, spec.max_chars)))
            budgets = ((_BLOCK + "_TEXT", spec.max_tokens),)
        pieces.append((_BLOCK + "_CLOSE", Concat((Literal(spec.end), *closing))))
        terminals = tuple(Terminal(name, regex) for name, regex in pieces)
        block = tuple(name for name, _ in pieces)
    alternatives: tuple[tuple[str, ...], ...] = ((*block, _ANSWER),)
    if plan.optional:
        alternatives += ((_ANSWER,),)
    outer = Grammar(
        rules=(Rule("start", alternatives),),
        terminals=terminals,
        start="start",
        greedy=answer.greedy,
        token_budgets=budgets,
    )
    return splice(outer, {_ANSWER: answer}).normalise()


def _text_before(end: str, max_chars: int | None) -> Regex:
    """Return the texts ``w`` for which ``end`` first occurs in ``w + end`` at its end.

    ``w`` holds no ``end``, and does not end with a part of ``end`` that ``end`` would complete
    early (``end`` = ``u + v`` with ``v`` both a prefix and a suffix of ``end``: ``w + u + v``
    would hold ``end`` before its end).
    """
    early = [end[: len(end) - b] for b in range(1, len(end)) if end[:b] == end[-b:]]
    parts: list[Regex] = [free_text([end], max_chars)]
    if early:
        parts.append(Complement(Concat((ANY_TEXT, Alt(tuple(Literal(u) for u in early))))))
    return parts[0] if len(parts) == 1 else Intersect(tuple(parts))


def split_reasoning(text: str, plan: ReasoningPlan) -> list[tuple[str | None, str]]:
    """Return the ways to read ``text`` as (reasoning, answer), the likeliest first.

    The reasoning block ends at the first end marker; the line breaks after it belong to the
    block when the answer can do without them, so the readings try the most line breaks taken
    by the block first. Without a block (an optional one skipped) the reasoning is ``None``.

    Parameters
    ----------
    text : str
        A finished output.
    plan : ReasoningPlan
        The plan it was generated with.

    Returns
    -------
    list of (str or None, str)
        Readings ``(reasoning, answer text)``; the last one is tried last.
    """
    spec = plan.reasoning
    readings: list[tuple[str | None, str]] = []
    if plan.opened:
        body = text
    elif text.startswith(spec.start):
        body = text[len(spec.start) :]
    else:
        body = ""  # no block: the end marker is not looked for
    at = body.find(spec.end)
    if at >= 0:
        reasoning = body[:at]
        rest = body[at + len(spec.end) :]
        taken = len(rest) - len(rest.lstrip("\n"))
        readings.extend((reasoning, rest[k:]) for k in range(min(taken, spec.newlines), -1, -1))
    if plan.optional or not readings:
        readings.append((None, text))
    return readings


def read_reasoning(text: str, plan: ReasoningPlan, answer: OutputType) -> tuple[str | None, Any]:
    """Return the reasoning of ``text`` and the value of its answer (``answer``'s parser).

    Parameters
    ----------
    text : str
        A finished output.
    plan : ReasoningPlan
        The plan it was generated with.
    answer : OutputType
        The constraint's output type, whose parser reads the answer.

    Returns
    -------
    tuple of (str or None, value)
        The reasoning without its markers (``None``: no block) and the answer's value.

    Raises
    ------
    OutputValidationError
        If no reading of ``text`` (:func:`split_reasoning`) gives a valid answer.
    """
    readings = split_reasoning(text, plan)
    for reasoning, rest in readings[:-1]:
        try:
            return reasoning, answer.parse(rest)
        except OutputValidationError:  # another reading of the line breaks may parse
            continue
    reasoning, rest = readings[-1]
    return reasoning, answer.parse(rest)


def reasoning_output(answer: OutputType, plan: ReasoningPlan) -> OutputType:
    """Return the output type of a reasoning block followed by ``answer``'s output.

    Its parser returns ``answer``'s value for the answer part; :func:`read_reasoning` gives the
    reasoning too (``generate`` reports it as ``GenerationResult.reasoning``).

    Raises
    ------
    GrammarError
        If the composed grammar cannot be built.
    """
    grammar = reasoning_grammar(answer.grammar, plan)

    def parse(text: str) -> Any:
        return read_reasoning(text, plan, answer)[1]

    markers = f"{plan.reasoning.start}...{plan.reasoning.end}"
    described = f"reasoning ({markers}), then {answer.description}"
    return replace(answer, grammar=grammar, description=described, _parse=parse)
