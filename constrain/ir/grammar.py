"""Stage 1: the Grammar IR shared by every front end.

A :class:`Grammar` is a context-free grammar in BNF over *terminals*, and every terminal is a
regular expression given as regex IR (:mod:`constrain.ir.nodes`). Front ends (regex, Lark, JSON
Schema, pydantic) build this IR; stage 3 (``constrain.automata``) turns terminals into
byte-level DFAs and rules into parser tables.

The IR is made of frozen dataclasses, so a grammar is hashable and safe to share. ``str(grammar)``
prints it back as Lark text (:meth:`Grammar.to_lark`), which ``Grammar.from_lark`` reads again.

Naming follows Lark: terminal names start with an uppercase letter (after optional underscores),
rule names with a lowercase one.

The ``Grammar.from_*`` constructors are the one place where the IR reaches up the stage ladder:
each imports its front end when called (deferred), so that ``Grammar.from_regex(...)`` is the
documented way in while the IR itself depends on no front end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constrain._gc import paused_gc
from constrain.errors import GrammarError
from constrain.ir.nodes import Regex, matches_empty, non_empty
from constrain.ir.printer import expand_nullable, lark_names, terminal_to_lark

__all__ = ["TOKEN_ALIGNMENTS", "Grammar", "Rule", "Terminal", "is_terminal_name"]

TOKEN_ALIGNMENTS = {"end": "token_end", "token": "one_token"}
"""The kinds of :attr:`Grammar.token_aligned`, and the Lark attribute that spells each."""


# --------------------------------------------------------------------------------------------
# Grammar IR
# --------------------------------------------------------------------------------------------


def is_terminal_name(name: str) -> bool:
    """Return whether ``name`` follows the Lark terminal convention (``_?[A-Z]...``)."""
    stripped = name.lstrip("_")
    return bool(stripped) and stripped[0].isupper()


@dataclass(frozen=True, slots=True)
class Terminal:
    """A named terminal: a regular language given as regex IR.

    Parameters
    ----------
    name : str
        Terminal name (uppercase first letter).
    regex : Regex
        Its language.
    """

    name: str
    regex: Regex


@dataclass(frozen=True, slots=True)
class Rule:
    """A nonterminal and its alternatives; each alternative is a sequence of symbol names.

    An empty alternative ``()`` derives the empty string.
    """

    name: str
    alternatives: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Grammar:
    """A context-free grammar over regular terminals: the IR every front end compiles to.

    Build one with :meth:`from_regex`, :meth:`from_lark`, :meth:`from_lark_file`,
    or :meth:`builtin`, then compile it with
    ``constrain.Compiler(vocab).compile(grammar)``.

    Parameters
    ----------
    rules : tuple of Rule
        The rules, one per nonterminal.
    terminals : tuple of Terminal
        The terminals referenced by the rules (and the ignored ones).
    start : str
        The start nonterminal.
    ignore : tuple of str, optional
        Terminals that may appear between any two lexemes (Lark ``%ignore``).
    greedy : bool, optional
        Lex greedily (longest match, as Lark's ``basic`` lexer): a lexeme may end before a byte
        only if no terminal of the grammar could take that byte next. With it, ``SELECTION``
        is one identifier, never the keyword ``SELECT`` followed by ``ION``. Off by default:
        every split the terminals allow is followed (``"list" | "listen"`` then ``"ed"``
        accepts ``listed``).
    ignore_at_end : bool, optional
        Whether ignored lexemes may follow the last terminal (Lark's rule, the default). With
        ``False`` (a ``%ignore_at_end false`` line) an ignored lexeme must be followed by a
        terminal: a generated text ends right after its last token, never in whitespace, and
        before each terminal comes at most one ignored lexeme. It takes one ignored terminal
        (join several into one); under greedy lexing no terminal may start with a byte that
        could continue the ignored one (so that the language stays inside Lark's).
    special_names : tuple of str, optional
        Names of special tokens the terminals use by name (Lark ``<|im_end|>``): name ``k`` is
        the placeholder character :func:`~constrain.ir.special_placeholder` ``(k)``, which
        ``Compiler.compile`` replaces with the token of that name in its vocabulary.
    token_budgets : tuple of (str, int), optional
        Terminals whose every occurrence may span at most so many tokens (XGrammar's
        ``max_tokens``, a reasoning budget): the tokens that *start* inside an occurrence are
        counted (one that merely ends the bytes before it is not), and once there are that many
        the occurrence ends where it stands. A byte grammar cannot count tokens, so the
        :class:`~constrain.Matcher` enforces them; each such terminal is used at one place of
        the grammar (see :class:`~constrain.Matcher`).
    token_aligned : tuple of (str, str), optional
        Terminals whose lexemes end only where a token ends, as XGrammar reads its token-level
        regions: ``(name, "end")`` (``any_tokens``: text after the region starts at a token
        boundary); ``(name, "token")`` also keeps a lexeme from spanning a token boundary, so
        it is the rest of the token it starts in (``exclude_token``). A byte grammar has no
        token boundaries, so the :class:`~constrain.Matcher` places them; text given to
        ``accept_bytes`` is read as one token.
    """

    rules: tuple[Rule, ...]
    terminals: tuple[Terminal, ...]
    start: str
    ignore: tuple[str, ...] = ()
    greedy: bool = False
    ignore_at_end: bool = True
    special_names: tuple[str, ...] = ()
    token_budgets: tuple[tuple[str, int], ...] = ()
    token_aligned: tuple[tuple[str, str], ...] = ()
    _meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_regex(cls, pattern: str) -> Grammar:
        r"""Return the grammar of the strings that fully match a Python ``re`` pattern.

        Supports classes, ``\d \w \s`` (Unicode, as Python), ``.``, quantifiers (lazy ones are
        treated as greedy), alternation, groups and ``^``/``$`` at the ends. Lookaround and
        backreferences raise :class:`~constrain.RegexError` naming the construct and offset.

        Parameters
        ----------
        pattern : str
            The regular expression.

        Returns
        -------
        Grammar
            A grammar with a single terminal.

        Raises
        ------
        RegexError
            If the pattern is invalid or uses an unsupported construct.
        """
        from constrain.frontends.regex import parse_regex

        with paused_gc():
            return cls.from_terminal_regex(parse_regex(pattern))

    @classmethod
    def from_terminal_regex(cls, regex: Regex, name: str = "REGEX") -> Grammar:
        """Return a single-terminal grammar ``start: NAME`` for a regex IR node."""
        return cls(
            rules=(Rule("start", ((name,),)),), terminals=(Terminal(name, regex),), start="start"
        )

    @classmethod
    def from_lark(cls, text: str, *, start: str = "start", lexer: str | None = None) -> Grammar:
        """Return the grammar of a Lark grammar text (rules, terminals, ``%import``, ``%ignore``).

        Parameters
        ----------
        text : str
            Grammar text in Lark syntax.
        start : str, optional
            The start rule.
        lexer : {"dynamic_complete", "basic"}, optional
            ``"basic"`` lexes greedily, as Lark's basic lexer (:attr:`greedy`); the default
            follows every split (a ``%lexer basic`` line in the text sets it too).

        Raises
        ------
        LarkGrammarError
            With line/column when the grammar is invalid.
        """
        from constrain.frontends.lark import parse_lark

        with paused_gc():
            return parse_lark(text, start=start, lexer=lexer)

    @classmethod
    def from_ebnf(cls, text: str, *, root: str = "root") -> Grammar:
        """Return the grammar of an EBNF text in XGrammar's syntax (llama.cpp's GBNF).

        ``name ::= body`` rules with strings, character classes, groups, ``|``, ``* + ?`` and
        ``{m,n}``; see :mod:`constrain.frontends.ebnf` for what is read and refused.

        Raises
        ------
        GrammarError
            With ``"line L, column C"`` when the grammar is invalid or uses what is refused.
        """
        from constrain.frontends.ebnf import parse_ebnf

        with paused_gc():
            return parse_ebnf(text, root)

    @classmethod
    def from_lark_file(
        cls, path: str | Path, *, start: str = "start", lexer: str | None = None
    ) -> Grammar:
        """Return the grammar of a ``.lark`` file (relative ``%import`` from its folder)."""
        from constrain.frontends.lark import parse_lark_file

        with paused_gc():
            return parse_lark_file(Path(path), start=start, lexer=lexer)

    @classmethod
    def builtin(cls, name: str) -> Grammar:
        """Return a grammar shipped in ``constrain.grammars`` by name (``"json"``, ``"sql"``, ...).

        Raises
        ------
        ValueError
            If no such grammar ships; the message lists the available names.
        """
        from constrain.frontends.lark import builtin_grammar

        return builtin_grammar(name)

    @classmethod
    def from_json_schema(cls, schema: Any, **options: Any) -> Grammar:
        """Return the grammar of the JSON texts of a JSON Schema's instances.

        Parameters
        ----------
        schema : dict, bool or str
            The schema (draft 2020-12, and the draft 4-7 spellings), or its JSON text.
        whitespace : {"compact", "spaced", "flexible", "indent"}, optional
            ``"compact"`` (default): no whitespace. ``"spaced"``: exactly ``", "`` and
            ``": "`` as separators, nothing else (Python's ``json.dumps`` layout, the one
            models see most). ``"flexible"``: up to ``max_whitespace`` characters of
            whitespace after every token. ``"indent"``: an optional newline and bounded
            indentation. Whitespace is never unbounded.
        max_whitespace : int, optional
            Longest whitespace run (default 4).
        any_order : bool, optional
            Accept object properties in any order (required ones enforced, none repeated); the
            default is declaration order.
        one_of : {"exact", "any"}, optional
            ``"exact"`` (default): ``oneOf`` means exactly one branch (an error if that cannot
            be enforced); ``"any"``: read it as ``anyOf``.
        formats : {"enforce", "ignore"}, optional
            Enforce ``format`` (default) or treat it as an annotation.
        lenient : bool, optional
            Turn unsupported keywords into warnings (``grammar.warnings``) instead of errors.
        python_compatible : bool, optional
            Also keep the output readable by Python's and pydantic's parsers: integers written
            plainly (no fraction or exponent), other numbers within float64 range, no leap
            second in ``date-time``/``time``. Default False (True for :meth:`from_pydantic`).
        max_number_digits : int, optional
            Write every number plainly (no exponent) with at most this many integer digits and
            this many fraction digits (more where the schema's own bounds need them): a subset
            of the schema's language that keeps a greedy model from writing digits until
            ``max_tokens``. Each number it narrows is listed in ``grammar.warnings``. Default
            None (unbounded); :func:`constrain.generate` uses 15.

        Raises
        ------
        JsonSchemaError
            With the JSON pointer of a keyword that cannot be enforced (see docs/json_schema.md).
        CompileLimitError
            When a limit (``max_branches``, ``max_combinations``, ``max_repeat``,
            ``max_any_order_properties``) is hit.
        TypeError
            For an unknown option.
        ValueError
            For an option value out of range (``whitespace``, ``max_number_digits``).
        """
        from constrain.frontends.json_schema.emit import compile_json_schema
        from constrain.frontends.json_schema.shapes import JsonSchemaOptions

        try:
            opts = JsonSchemaOptions(**options)
        except TypeError as err:
            raise TypeError(f"Grammar.from_json_schema: {err}") from err
        with paused_gc():
            return compile_json_schema(schema, opts)

    @classmethod
    def from_json_schema_file(cls, path: str | Path, **options: Any) -> Grammar:
        """Return :meth:`from_json_schema` of a schema read from a JSON file."""
        return cls.from_json_schema(Path(path).read_text(encoding="utf-8"), **options)

    @classmethod
    def from_pydantic(cls, model: Any, **options: Any) -> Grammar:
        """Return the grammar of a pydantic model's JSON (options of :meth:`from_json_schema`).

        The output parses with ``Model.model_validate_json``. Objects of models with pydantic's
        default ``extra="ignore"`` get exactly their declared fields (unknown keys would be
        dropped by validation anyway); ``extra_properties=True`` keeps pydantic's schema as is.
        """
        from constrain.frontends.pydantic import pydantic_schema

        extra = bool(options.pop("extra_properties", False))
        options.setdefault("python_compatible", True)
        return cls.from_json_schema(pydantic_schema(model, extra_properties=extra), **options)

    @classmethod
    def from_structural_tag(cls, spec: Any) -> Grammar:
        """Return the grammar of an XGrammar structural tag (tool calls inside free text).

        Parameters
        ----------
        spec : dict or str
            ``{"type": "structural_tag", "format": {...}}`` (format types ``const_string``,
            ``json_schema``, ``regex``, ``grammar``, ``any_text``, ``sequence``, ``or``,
            ``tag``, ``triggered_tags``, ``tags_with_separator``, ``optional``, ``star``,
            ``plus``, ``repeat``, ``dispatch``, ``token``, and the token-level ``any_tokens``,
            ``exclude_token``, ``token_triggered_tags``, ``token_dispatch``), the legacy
            ``{"triggers": [...], "tags": [{"begin", "schema", "end"}]}``, or either as JSON
            text. The language is
            XGrammar's on the same spec (docs/tool_calling.md).

        Raises
        ------
        GrammarError
            With the JSON pointer of a malformed or unsupported format.
        JsonSchemaError
            With the pointer of a keyword of an embedded schema that cannot be enforced.
        """
        from constrain.frontends.structural_tag import parse_structural_tag

        return parse_structural_tag(spec)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a lenient front end did not enforce (empty for a strict grammar)."""
        return tuple(self._meta.get("warnings", ()))

    # -- queries ----------------------------------------------------------------------------

    def terminal_map(self) -> dict[str, Terminal]:
        """Return ``{name: Terminal}``."""
        return {t.name: t for t in self.terminals}

    def rule_map(self) -> dict[str, Rule]:
        """Return ``{name: Rule}``."""
        return {r.name: r for r in self.rules}

    def is_regular_terminal(self) -> bool:
        """Return whether the grammar is exactly ``start: TERMINAL`` with nothing ignored."""
        if self.ignore or len(self.rules) != 1:
            return False
        rule = self.rules[0]
        return (
            rule.name == self.start
            and len(rule.alternatives) == 1
            and len(rule.alternatives[0]) == 1
            and rule.alternatives[0][0] in self.terminal_map()
        )

    def without_terminals(self, names: Iterable[str]) -> Grammar:
        """Return the grammar with these terminals removed, and every alternative using them."""
        gone = set(names)
        rules = tuple(
            Rule(r.name, tuple(a for a in r.alternatives if not gone.intersection(a)))
            for r in self.rules
        )
        terminals = tuple(t for t in self.terminals if t.name not in gone)
        ignore = tuple(n for n in self.ignore if n not in gone)
        return dataclasses.replace(
            self,
            rules=rules,
            terminals=terminals,
            ignore=ignore,
            **self._token_attributes(lambda name: name not in gone),
        )

    def _token_attributes(self, keep: Callable[[str], bool]) -> dict[str, Any]:
        """Return ``token_budgets`` and ``token_aligned`` of the terminals ``keep`` keeps.

        The keyword arguments of :func:`dataclasses.replace` for a grammar that drops terminals.
        """
        return {
            "token_budgets": tuple(b for b in self.token_budgets if keep(b[0])),
            "token_aligned": tuple(a for a in self.token_aligned if keep(a[0])),
        }

    # -- normalisation ----------------------------------------------------------------------

    def validate(self) -> None:
        """Check that every referenced symbol is defined and names follow the conventions.

        Raises
        ------
        GrammarError
            Naming the undefined symbol and the rule that uses it.
        """
        terms = self.terminal_map()
        rules = self.rule_map()
        if len(terms) != len(self.terminals):
            raise GrammarError("duplicate terminal names in grammar")
        if len(rules) != len(self.rules):
            raise GrammarError("duplicate rule names in grammar")
        if self.start not in rules:
            raise GrammarError(f"start rule {self.start!r} is not defined")
        for rule in self.rules:
            for alt in rule.alternatives:
                for sym in alt:
                    if sym not in terms and sym not in rules:
                        raise GrammarError(
                            f"rule {rule.name!r} uses undefined symbol {sym!r}; define it or fix "
                            "the spelling"
                        )
        for name in self.ignore:
            if name not in terms:
                raise GrammarError(f"%ignore names undefined terminal {name!r}")
        if len(set(self.special_names)) != len(self.special_names) or "" in self.special_names:
            raise GrammarError("special_names must be distinct, non-empty token names")
        budgeted = [name for name, _ in self.token_budgets]
        if len(set(budgeted)) != len(budgeted):
            raise GrammarError("token_budgets names a terminal twice")
        for name, limit in self.token_budgets:
            if name not in terms or name in self.ignore:
                raise GrammarError(
                    f"token_budgets names {name!r}, which is not a terminal of the grammar (or is "
                    "an ignored one, which no budget can bound)"
                )
            if type(limit) is not int or limit < 1:
                raise GrammarError(
                    f"the token budget of {name!r} must be an integer of at least 1, got "
                    f"{limit!r} (a budget of 0 tokens is the empty string: leave the terminal out)"
                )
        aligned = [name for name, _ in self.token_aligned]
        if len(set(aligned)) != len(aligned):
            raise GrammarError("token_aligned names a terminal twice")
        for name, kind in self.token_aligned:
            if name not in terms or name in self.ignore:
                raise GrammarError(
                    f"token_aligned names {name!r}, which is not a terminal of the grammar (or is "
                    "an ignored one)"
                )
            if kind not in TOKEN_ALIGNMENTS:
                raise GrammarError(
                    f"the token alignment of {name!r} is 'end' or 'token', got {kind!r}"
                )

    def normalise(self) -> Grammar:
        """Return an equivalent grammar keeping only productive rules reachable from the start.

        Raises
        ------
        GrammarError
            If the start rule derives no string at all (the grammar accepts nothing).
        """
        self.validate()
        return self._without_empty_terminals()._reduce()

    def _reduce(self) -> Grammar:
        """Keep the productive rules reachable from the start (see :meth:`normalise`).

        Linear in the grammar: each alternative counts its symbols not yet known productive,
        and a rule found productive lowers the counts of the alternatives that use it (a pass
        over the rules until nothing changes took a dozen passes on 3,000 rules written in no
        helpful order).
        """
        terms = self.terminal_map()
        rules = self.rule_map()
        productive: set[str] = set(terms)
        owner: list[Rule] = []
        missing: list[int] = []
        users: dict[str, list[int]] = {}
        found: list[str] = []
        for rule in self.rules:
            for alt in rule.alternatives:
                need = {s for s in alt if s not in terms}
                k = len(owner)
                owner.append(rule)
                missing.append(len(need))
                if not need:
                    found.append(rule.name)
                for sym in need:
                    users.setdefault(sym, []).append(k)
        while found:
            name = found.pop()
            if name in productive:
                continue
            productive.add(name)
            for k in users.get(name, ()):
                missing[k] -= 1
                if missing[k] == 0:
                    found.append(owner[k].name)
        if self.start not in productive:
            raise GrammarError(
                f"the grammar accepts no string: rule {self.start!r} never derives a finite "
                "sequence of terminals (every alternative recurses forever)"
            )
        kept: dict[str, Rule] = {}
        k = 0
        for rule in self.rules:
            n = len(rule.alternatives)
            if rule.name in productive:
                alts = tuple(a for j, a in enumerate(rule.alternatives) if missing[k + j] == 0)
                kept[rule.name] = rule if len(alts) == n else Rule(rule.name, alts)
            k += n
        reachable: list[str] = [self.start]
        seen = {self.start}
        used_terms: set[str] = set(self.ignore)
        i = 0
        while i < len(reachable):
            for alt in kept[reachable[i]].alternatives:
                for sym in alt:
                    if sym in terms:
                        used_terms.add(sym)
                    elif sym not in seen and sym in rules:
                        seen.add(sym)
                        reachable.append(sym)
            i += 1
        return dataclasses.replace(
            self,
            rules=tuple(kept[n] for n in reachable),
            terminals=tuple(t for t in self.terminals if t.name in used_terms),
            **self._token_attributes(used_terms.__contains__),
        )

    def _without_empty_terminals(self) -> Grammar:
        """Return an equivalent grammar whose terminals never match the empty string.

        A nullable terminal ``T`` keeps its non-empty part and each use of it becomes a new rule
        ``t_opt: T | <empty>`` (linear in the grammar, unlike spelling out every combination).
        A terminal that matches only the empty string disappears.
        """
        nullable = {t.name: non_empty(t.regex) for t in self.terminals if matches_empty(t.regex)}
        if not nullable:
            return self
        taken = {r.name for r in self.rules}
        opt: dict[str, str] = {}
        extra: list[Rule] = []
        for name, rest in nullable.items():
            base = "__" + name.lower().lstrip("_") + "_opt"
            rule_name, k = base, 2
            while rule_name in taken:
                rule_name, k = f"{base}{k}", k + 1
            taken.add(rule_name)
            opt[name] = rule_name
            extra.append(Rule(rule_name, ((name,), ()) if rest is not None else ((),)))
        rules = tuple(
            Rule(r.name, tuple(tuple(opt.get(sym, sym) for sym in alt) for alt in r.alternatives))
            for r in self.rules
        ) + tuple(extra)
        terminals = tuple(
            Terminal(t.name, rest)
            for t in self.terminals
            if (rest := nullable.get(t.name, t.regex)) is not None
        )
        kept = {t.name for t in terminals}
        return dataclasses.replace(
            self,
            rules=rules,
            terminals=terminals,
            ignore=tuple(n for n in self.ignore if n in kept),
            **self._token_attributes(kept.__contains__),
        )

    # -- printing ---------------------------------------------------------------------------

    def to_lark(self) -> str:
        """Print the grammar as Lark text that ``Grammar.from_lark`` reads back.

        The text has the same language under Lark's Earley parser and under
        ``Grammar.from_lark``. Names that Lark cannot read (``__start_star_0``, template
        instances such as ``_sep{item,COMMA}``, names with other characters) are renamed to
        close legal names, so the start rule keeps its name whenever it is legal. Duplicate
        alternatives are dropped, a terminal that matches the empty string is printed as its
        non-empty part and made optional where it is used (Lark rejects zero-width terminals),
        and a rule without alternatives is printed as ``r: r`` (it derives nothing).

        Returns
        -------
        str
            Rules first (start rule first), then terminals (a token budget as
            ``NAME[max_tokens=N]``, a token alignment as ``NAME[token_end]`` or
            ``NAME[one_token]``), then ``%ignore`` lines, and ``%lexer basic`` for a greedy
            grammar, ``%ignore_at_end false`` where it applies.

        Raises
        ------
        GrammarError
            If a terminal uses :class:`Intersect` or :class:`Complement`, which Lark's regexes
            cannot express (the grammar still compiles).
        """
        names = lark_names(self)
        terms = self.terminal_map()
        # Nullable terminal -> its non-empty part (None when it matches only the empty string).
        nullable = {t.name: non_empty(t.regex) for t in self.terminals if matches_empty(t.regex)}
        lines: list[str] = []
        for rule in sorted(self.rules, key=lambda r: r.name != self.start):
            alts: dict[str, None] = {}
            for alt in rule.alternatives:
                for expanded in expand_nullable(alt, nullable):
                    alts.setdefault(" ".join(names.get(s, s) for s in expanded))
            body = "\n    | ".join(alts) if alts else names[rule.name]
            lines.append(f"{names[rule.name]}: {body}".replace(" \n", "\n").rstrip())
        printed = [t for t in self.terminals if nullable.get(t.name, t.regex) is not None]
        if printed:
            lines.append("")
        attributes: dict[str, list[str]] = {}
        for name, limit in self.token_budgets:
            attributes.setdefault(name, []).append(f"max_tokens={limit}")
        for name, kind in self.token_aligned:
            attributes.setdefault(name, []).append(TOKEN_ALIGNMENTS[kind])
        for term in printed:
            regex = nullable.get(term.name, term.regex)
            assert regex is not None
            attrs = attributes.get(term.name)
            head = names[term.name] + (f"[{', '.join(attrs)}]" if attrs else "")
            lines.append(f"{head}: {terminal_to_lark(regex, self.special_names)}")
        lines.extend(
            f"%ignore {names[name]}"
            for name in dict.fromkeys(self.ignore)
            if name in terms and nullable.get(name, terms[name].regex) is not None
        )
        if self.greedy:
            lines.append("%lexer basic")  # constrain's directive (Lark's lexer="basic")
        if not self.ignore_at_end and self.ignore:
            lines.append("%ignore_at_end false")  # constrain's directive
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_lark()
