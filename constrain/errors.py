"""Every public exception of ``constrain``.

The hierarchy follows lark's dual-inheritance model, so ``except ValueError`` keeps working for
user-input errors::

    ConstrainError(Exception)
    +-- GrammarError(ConstrainError, ValueError)        compile-time, user input; .location
    |   +-- RegexError                                  offset + caret context
    |   +-- JsonSchemaError                             .pointer, e.g. "#/properties/age/pattern"
    |   +-- LarkGrammarError                            line/column
    +-- VocabularyError(ConstrainError, ValueError)
    +-- CompileLimitError(ConstrainError)               .limit, .value
    +-- MatcherStateError(ConstrainError, RuntimeError) API misuse
    +-- IncompleteOutputError(ConstrainError)           .partial_text
    +-- OutputValidationError(ConstrainError)           .text (a bug: never expected)

A rejected token is data (``Matcher.accept_token`` returns ``False``), never an exception.
"""

from __future__ import annotations

__all__ = [
    "CompileLimitError",
    "ConstrainError",
    "GrammarError",
    "IncompleteOutputError",
    "JsonSchemaError",
    "LarkGrammarError",
    "MatcherStateError",
    "OutputValidationError",
    "RegexError",
    "VocabularyError",
    "caret_context",
]


def caret_context(text: str, offset: int, *, width: int = 60) -> str:
    """Return the line of ``text`` around ``offset`` with a caret under that position.

    Parameters
    ----------
    text : str
        The source text (a regex, a grammar).
    offset : int
        Zero-based character offset to point at; clamped to ``[0, len(text)]``.
    width : int, optional
        Maximum number of characters shown on either side of the caret.

    Returns
    -------
    str
        Two lines: the excerpt and a caret line.
    """
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    if line_end < 0:
        line_end = len(text)
    start = max(line_start, offset - width)
    end = min(line_end, offset + width)
    excerpt = text[start:end]
    prefix = "..." if start > line_start else ""
    suffix = "..." if end < line_end else ""
    caret = " " * (len(prefix) + offset - start) + "^"
    return f"{prefix}{excerpt}{suffix}\n{caret}"


def line_col(text: str, offset: int) -> tuple[int, int]:
    """Return the 1-based (line, column) of a 0-based character offset in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


class ConstrainError(Exception):
    """Base class of every error raised by ``constrain``."""


class GrammarError(ConstrainError, ValueError):
    """A grammar, regex or schema given by the user cannot be compiled.

    Parameters
    ----------
    message : str
        What is wrong and how to fix it.
    location : str or None, optional
        Where: ``"offset 12"``, ``"line 3, column 7"`` or a JSON pointer.
    """

    def __init__(self, message: str, location: str | None = None) -> None:
        super().__init__(message if location is None else f"{message} (at {location})")
        self.location = location


class RegexError(GrammarError):
    """A regular expression is invalid or uses an unsupported construct.

    Parameters
    ----------
    message : str
        What is wrong.
    pattern : str
        The whole regex.
    offset : int
        Zero-based offset of the offending construct in ``pattern``.
    """

    def __init__(self, message: str, pattern: str, offset: int) -> None:
        self.pattern = pattern
        self.offset = offset
        super().__init__(
            f"{message}\n{caret_context(pattern, offset)}", location=f"offset {offset}"
        )


class JsonSchemaError(GrammarError):
    """A JSON Schema is invalid or uses a keyword that cannot be enforced.

    Parameters
    ----------
    message : str
        What is wrong and how to fix it (see docs/json_schema.md).
    pointer : str
        JSON pointer of the offending schema location, e.g. ``"#/properties/age"``.
    """

    def __init__(self, message: str, pointer: str = "#") -> None:
        self.pointer = pointer
        super().__init__(message, location=pointer)


class LarkGrammarError(GrammarError):
    """A Lark grammar is invalid or uses an unsupported feature.

    Parameters
    ----------
    message : str
        What is wrong.
    line, column : int or None
        1-based position in the grammar text when known.
    context : str, optional
        Excerpt with a caret.
    """

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        context: str = "",
    ) -> None:
        self.line = line
        self.column = column
        location = None if line is None else f"line {line}, column {column}"
        super().__init__(f"{message}\n{context}" if context else message, location=location)


class VocabularyError(ConstrainError, ValueError):
    """A tokenizer or vocabulary cannot be turned into token bytes."""


class CompileLimitError(ConstrainError):
    """An automaton or table grew past a configured limit.

    Parameters
    ----------
    limit_name : str
        The name of the limit (an attribute of ``constrain.CompileLimits``).
    limit : int
        The configured maximum.
    value : int
        The size that was reached.
    hint : str, optional
        How to proceed (raise the limit, simplify the grammar).
    """

    def __init__(self, limit_name: str, limit: int, value: int, hint: str = "") -> None:
        self.limit_name = limit_name
        self.limit = limit
        self.value = value
        msg = f"compile limit {limit_name}={limit} exceeded (reached {value})"
        if hint:
            msg += f"; {hint}"
        super().__init__(msg)


class MatcherStateError(ConstrainError, RuntimeError):
    """The matcher API was misused (e.g. rolling back more tokens than were accepted)."""


class IncompleteOutputError(ConstrainError):
    """Generation stopped before the grammar accepted the output.

    Parameters
    ----------
    message : str
        Why generation stopped.
    partial_text : str
        The text produced so far.
    """

    def __init__(self, message: str, partial_text: str) -> None:
        super().__init__(message)
        self.partial_text = partial_text


class OutputValidationError(ConstrainError):
    """A finished output failed the independent final validation (a bug in constrain).

    :func:`constrain.generate` checks every output once more, outside the automata (pydantic,
    ``jsonschema``, ``re.fullmatch``, lark). The matcher having accepted a text that fails this
    check means the compiled grammar is wrong: please report it with the schema or grammar.

    Parameters
    ----------
    message : str
        What the check found.
    text : str
        The generated text.
    """

    def __init__(self, message: str, text: str) -> None:
        super().__init__(f"{message} (this is a bug in constrain; please report it)")
        self.text = text
