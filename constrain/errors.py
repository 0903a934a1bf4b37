"""Every public exception of ``constrain``.

The hierarchy follows lark's dual-inheritance model, so ``except ValueError`` keeps working for
user-input errors::

    ConstrainError(Exception)
    +-- GrammarError(ConstrainError, ValueError)        compile-time, user input; .location
    |   +-- RegexError                                  offset + caret context
    |   +-- JsonSchemaError                             .pointer, e.g. "#/properties/age/pattern"
    |   +-- LarkGrammarError                            line/column
    |   +-- EmptyTerminalError                          .names (terminals with no string)
    +-- VocabularyError(ConstrainError, ValueError)
    +-- SavedFileError(ConstrainError, ValueError)      .path: a damaged or foreign saved file
    +-- CompileLimitError(ConstrainError)               .limit, .value
    +-- NotRegularError(ConstrainError, TypeError)      .rule (diffusion's token-level DFA)
    +-- MatcherStateError(ConstrainError, RuntimeError) API misuse
    +-- SamplerError(ConstrainError, ValueError)        a sampler's inputs or options
    +-- ModelNotFoundError(ConstrainError, FileNotFoundError)
    +-- IncompleteOutputError(ConstrainError)           .partial_text
    +-- OutputValidationError(ConstrainError)           .text (a bug: never expected)
    +-- InternalError(ConstrainError, RuntimeError)     an invariant broke (a bug: never expected)
    CliError(ConstrainError)                            a command-line user error (exit status 1)

A rejected token is data (``Matcher.accept_token`` returns ``False``), never an exception.
"""

from __future__ import annotations

__all__ = [
    "CliError",
    "CompileLimitError",
    "ConstrainError",
    "EmptyTerminalError",
    "GrammarError",
    "IncompleteOutputError",
    "InternalError",
    "JsonSchemaError",
    "LarkGrammarError",
    "MatcherStateError",
    "ModelNotFoundError",
    "NotRegularError",
    "OutputValidationError",
    "RegexError",
    "SamplerError",
    "SavedFileError",
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


class EmptyTerminalError(GrammarError):
    """Some terminals match no string at all; ``names`` lists them.

    The compiler drops them (a rule alternative that needs one derives nothing) and compiles
    again; a grammar left with no sentence is then the usual "accepts no string" error.
    """

    def __init__(self, names: list[str]) -> None:
        self.names = names
        listed = ", ".join(repr(n) for n in names)
        super().__init__(f"terminal {listed} matches no string at all (empty language)")


class VocabularyError(ConstrainError, ValueError):
    """A tokenizer or vocabulary cannot be turned into token bytes."""


class SavedFileError(ConstrainError, ValueError):
    """A saved file (a compiled grammar) is damaged, of another format version, or not one.

    Parameters
    ----------
    path : str
        The file.
    problem : str
        What is wrong with it, and how to proceed.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}")


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


class NotRegularError(ConstrainError, TypeError):
    """The grammar is context-free but not regular, so it has no token-level DFA.

    Raised by :func:`grammar_regex` and :meth:`TokenDfa.from_compiled`; ``rule`` names the rule
    whose recursion is self-embedding (such as balanced brackets).
    """

    def __init__(self, rule: str) -> None:
        self.rule = rule
        super().__init__(
            f"the grammar is not regular: rule {rule!r} is recursive with material on both "
            "sides of the recursion (self-embedding, e.g. nested brackets), so DINGO's "
            "token-level DFA does not exist; for a context-free grammar use "
            "constrain.decoding.diffusion.lave_step (LAVE) or InfillChecker (infilling), or "
            "bound the nesting and write the constraint as a regex"
        )


class MatcherStateError(ConstrainError, RuntimeError):
    """The matcher API was misused (e.g. rolling back more tokens than were accepted)."""


class SamplerError(ConstrainError, ValueError):
    """A sampler got inputs or options it cannot work with (a potential's score, a key)."""


class ModelNotFoundError(ConstrainError, FileNotFoundError):
    """The requested model (or the default model's package) is not installed."""


class IncompleteOutputError(ConstrainError):
    """Generation stopped before the grammar accepted the output.

    Parameters
    ----------
    message : str
        Why generation stopped.
    partial_text : str
        The text produced so far (of the first incomplete row, in a batch).
    partial_texts : dict of int to str, optional
        In a batch, every incomplete row's text by row index; ``{0: partial_text}`` otherwise.
    """

    def __init__(
        self, message: str, partial_text: str, partial_texts: dict[int, str] | None = None
    ) -> None:
        super().__init__(message)
        self.partial_text = partial_text
        self.partial_texts = {0: partial_text} if partial_texts is None else dict(partial_texts)


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


class InternalError(ConstrainError, RuntimeError):
    """An invariant of constrain broke (a bug in constrain; please report it with the grammar).

    Raised where the engine checks itself: a sampler finding no allowed token where the grammar
    promised a continuation or an end, or a grammar rejecting a block it built.
    """


class CliError(ConstrainError):
    """A user error the command line reports on one line (exit status 1)."""
