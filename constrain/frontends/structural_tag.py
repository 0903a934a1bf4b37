r"""Stage 1: the structural-tag front end, XGrammar's structural tag JSON -> Grammar IR.

A structural tag describes an agent's turn: free text, thinking blocks and tool calls in a chat
template's own syntax, where only some regions follow a JSON Schema, a regex or a grammar. Two
spellings are read:

- the current one, ``{"type": "structural_tag", "format": {...}}``, with the format types
  ``const_string``, ``json_schema``, ``regex``, ``grammar`` (Lark syntax), ``any_text``,
  ``sequence``, ``or``, ``tag``, ``triggered_tags``, ``tags_with_separator``, ``optional``,
  ``star``, ``plus``, ``repeat``, ``dispatch``, ``token`` (special tokens only), and the
  token-level ``any_tokens``, ``exclude_token``, ``token_triggered_tags``, ``token_dispatch``;
- the legacy one, ``{"triggers": [...], "tags": [{"begin", "schema", "end"}, ...]}`` (also with
  ``"structures"`` for ``"tags"``), which means ``triggered_tags`` over JSON Schema tags.

The language is XGrammar's on the same spec (see ``docs/tool_calling.md``): free text ends at
the first trigger it completes (the longest trigger ending there), excluded strings never occur
in free text (nor across its end into the trigger), free text inside a tag also excludes the
tag's end strings, ``json_schema`` is XGrammar's JSON (any whitespace between tokens, none
around the value, no undeclared properties or items where some are declared) and ``regex``
patterns have ECMAScript semantics (``\d`` is ASCII). ``token`` matches one special token by
id (an int) or by its string (resolved against the vocabulary when the grammar is compiled),
also as a ``tag``'s begin or end. A token-level region (``any_tokens``, the free part of
``token_triggered_tags`` and ``token_dispatch``) is any text and any special token except the
excluded ones, the trigger tokens and the enclosing tag's end token
(:mod:`constrain.frontends.special_sets`), read whole token by whole token: it ends where a
token ends (``exclude_token``: the rest of the token it starts in), which the matcher places
(:attr:`~constrain.ir.Grammar.token_aligned`). ``max_tokens`` of ``any_text`` and
``any_tokens`` bounds the region's tokens (:attr:`~constrain.ir.Grammar.token_budgets`,
counted by the matcher as XGrammar counts them). Inside the argument styles, what a style
cannot enforce is refused with a :class:`~constrain.errors.GrammarError` at its pointer. The
argument styles: ``qwen_xml`` (``qwen_xml_parameter``), ``minimax_xml``, ``glm_xml``,
``deepseek_xml``, ``deepseek_v4_1_xml``, ``kimi_k3_xml`` (``xml_arguments``),
``minimax_m3_xml`` and ``cohere_xml`` (``xml_elements``), and ``gemma`` (``gemma_json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from constrain.errors import GrammarError
from constrain.frontends.compose import (
    embed,
    free_text,
    until_first,
    with_special_names,
)
from constrain.frontends.special_sets import one_token, open_text
from constrain.frontends.xgrammar_json import xgrammar_json_schema
from constrain.ir import (
    Alt,
    Grammar,
    Literal,
    Regex,
    Rule,
    Terminal,
    special_placeholder,
    special_token,
)

__all__ = ["parse_structural_tag"]

Fragment = tuple[str, ...]
"""A sequence of grammar symbols, the IR of one format."""

_UNBOUNDED = frozenset(
    {"any_text", "triggered_tags", "dispatch", "any_tokens", "token_triggered_tags"}
    | {"token_dispatch"}
)
TokenRef = tuple[str, int]
"""A special token of a spec: ``("id", token_id)`` or ``("name", index into special_names)``."""


def _ids_and_names(refs: Sequence[TokenRef]) -> tuple[list[int], list[int]]:
    """Return the token ids and the name indices of some token references."""
    return [k for kind, k in refs if kind == "id"], [k for kind, k in refs if kind == "name"]


def parse_structural_tag(spec: Any) -> Grammar:
    """Return the grammar of an XGrammar structural tag.

    Parameters
    ----------
    spec : dict or str
        ``{"type": "structural_tag", "format": {...}}``, or the legacy
        ``{"triggers": [...], "tags": [{"begin", "schema", "end"}, ...]}``, or either as JSON
        text.

    Returns
    -------
    Grammar
        The grammar, normalised.

    Raises
    ------
    GrammarError
        If the spec is malformed or uses an unsupported format; ``location`` is the JSON
        pointer of the offending element (``#/format/elements/1``).
    JsonSchemaError
        If an embedded JSON Schema cannot be enforced; the pointer runs from the spec's root
        into the schema.
    RegexError
        Never directly: a bad ``regex`` pattern is reported as a GrammarError at its pointer.
    """
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as err:
            raise GrammarError(f"structural tag is not valid JSON: {err}", "#") from err
    if not isinstance(spec, Mapping):
        raise GrammarError(f"a structural tag is a JSON object, got {type(spec).__name__}", "#")
    builder = _Builder()
    if "format" in spec:
        if spec.get("type", "structural_tag") != "structural_tag":
            raise GrammarError(f"type must be 'structural_tag', got {spec['type']!r}", "#/type")
        top = builder.format(spec["format"], "#/format", None)
    elif "triggers" in spec:
        top = builder.format(_legacy_format(spec), "#", None)
    else:
        raise GrammarError(
            "a structural tag needs 'format' ({'type': 'structural_tag', 'format': ...}) or "
            "'triggers' and 'tags' (the legacy form)",
            "#",
        )
    return builder.grammar(top)


def _legacy_format(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``triggered_tags`` format of a legacy ``{"triggers", "tags"}`` spec."""
    key = "tags" if "tags" in spec else "structures"
    items = spec.get(key)
    if not isinstance(items, list):
        raise GrammarError(f"'{key}' must be a list of {{begin, schema, end}} objects", f"#/{key}")
    tags = []
    for i, item in enumerate(items):
        where = f"#/{key}/{i}"
        if not isinstance(item, Mapping):
            raise GrammarError("a tag is an object with 'begin', 'schema' and 'end'", where)
        schema = item.get("schema", item.get("parameters"))
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as err:
                raise GrammarError(f"schema is not valid JSON: {err}", f"{where}/schema") from err
        if schema is None:
            raise GrammarError("the tag has no 'schema'", where)
        content = {"type": "json_schema", "json_schema": schema}
        tags.append({"type": "tag", "begin": item.get("begin"), "content": content})
        tags[-1]["end"] = item.get("end")
    return {"type": "triggered_tags", "triggers": spec.get("triggers"), "tags": tags}


# --------------------------------------------------------------------------------------------
# Formats -> rules and terminals
# --------------------------------------------------------------------------------------------


def _field(fmt: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    """Return ``fmt[key]`` checked against ``kind`` (a GrammarError at its pointer if not)."""
    if key not in fmt:
        raise GrammarError(f"the format needs '{key}'", path)
    value = fmt[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise GrammarError(f"'{key}' must be {names}, got {value!r}", f"{path}/{key}")
    return value


def _strings(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise GrammarError(f"expected a list of strings, got {value!r}", path)
    return list(value)


def _optional_bool(fmt: Mapping[str, Any], key: str, path: str) -> bool:
    return bool(_field(fmt, key, bool, path)) if key in fmt else False


class _Builder:
    """Collect the rules and terminals of one structural tag."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.terminals: dict[Regex, str] = {}
        self.extra_terminals: list[Terminal] = []
        self.num_rules = 0
        self.num_embedded = 0
        self.special_names: list[str] = []
        self.end_token: TokenRef | None = None  # of the innermost tag, when a special token
        self.aligned: dict[str, str] = {}  # token-level terminal -> "end" or "token"
        self.budgets: list[tuple[str, int]] = []  # (terminal, max_tokens) of bounded regions

    def grammar(self, top: Fragment) -> Grammar:
        """Return the normalised grammar whose start rule derives ``top``."""
        terminals = tuple(Terminal(n, r) for r, n in self.terminals.items())
        grammar = Grammar(
            rules=(Rule("start", (top,)), *self.rules),
            terminals=terminals + tuple(self.extra_terminals),
            start="start",
            special_names=tuple(self.special_names),
            token_budgets=tuple(self.budgets),
            token_aligned=tuple(self.aligned.items()),
        )
        return grammar.normalise()

    def token_ref(self, value: Any, path: str) -> TokenRef:
        """Return the reference of a token given as an id or a string (a GrammarError if not)."""
        if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
            raise GrammarError(f"a token is a token id or a token string, got {value!r}", path)
        if isinstance(value, int):
            try:
                special_token(value)
            except ValueError as err:
                raise GrammarError(str(err), path) from err
            return ("id", value)
        if value not in self.special_names:
            self.special_names.append(value)
        return ("name", self.special_names.index(value))

    def token_term(self, ref: TokenRef) -> str:
        """Return the terminal of one special token."""
        kind, k = ref
        return self.term(special_token(k) if kind == "id" else special_placeholder(k))

    def token_refs(self, fmt: Mapping[str, Any], key: str, path: str) -> list[TokenRef]:
        """Return the tokens of a list field (empty when absent)."""
        values = fmt.get(key, [])
        if not isinstance(values, list):
            raise GrammarError(f"'{key}' must be a list of token ids or strings", f"{path}/{key}")
        return [self.token_ref(v, f"{path}/{key}/{i}") for i, v in enumerate(values)]

    def free_tokens(
        self, excluded: Sequence[TokenRef], path: str, fmt: Mapping[str, Any] | None = None
    ) -> Fragment:
        """Return the token-level region of any text and specials but ``excluded``."""
        fragment = self.budgeted(open_text(*_ids_and_names(excluded)), fmt or {}, path)
        for name in fragment:  # read whole token by whole token: it ends where a token ends
            self.aligned.setdefault(name, "end")
        return fragment

    def exclude_token(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        """One token but the excluded special tokens (``Grammar.token_aligned``, "token")."""
        excluded = self.token_refs(fmt, "exclude_tokens", path)
        excluded += [self.end_token] if self.end_token is not None else []
        name = f"X{sum(kind == 'token' for kind in self.aligned.values())}"
        self.extra_terminals.append(Terminal(name, one_token(*_ids_and_names(excluded))))
        self.aligned[name] = "token"
        return (name,)

    def budgeted(self, regex: Regex, fmt: Mapping[str, Any], path: str) -> Fragment:
        """Return a free region; with ``max_tokens``, a terminal the matcher counts (0: none)."""
        limit = fmt.get("max_tokens")
        if limit is None:
            return (self.term(regex),)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit < 2**31:
            raise GrammarError(
                f"max_tokens: an int in [0, 2**31), not {limit!r}", f"{path}/max_tokens"
            )
        if limit == 0:
            return ()
        name = f"B{len(self.budgets)}"
        self.extra_terminals.append(Terminal(name, regex))
        self.budgets.append((name, limit))
        return (name,)

    def term(self, regex: Regex) -> str:
        """Return the terminal of ``regex`` (interned)."""
        name = self.terminals.get(regex)
        if name is None:
            name = self.terminals[regex] = f"S{len(self.terminals)}"
        return name

    def literal(self, text: str) -> Fragment:
        """Return the fragment of a constant string (empty for ``""``)."""
        return (self.term(Literal(text)),) if text else ()

    def rule(self, alternatives: Sequence[Fragment], name: str | None = None) -> str:
        """Add a rule and return its name (a fresh one unless ``name`` is given)."""
        if name is None:
            name = self.fresh()
        self.rules.append(Rule(name, tuple(alternatives)))
        return name

    def fresh(self) -> str:
        """Return an unused rule name."""
        self.num_rules += 1
        return f"st{self.num_rules}"

    def add_embedded(self, grammar: Grammar) -> Fragment:
        """Add a sub-grammar under a fresh prefix and return its start symbol."""
        self.num_embedded += 1
        part = embed(with_special_names(grammar, self.special_names), f"g{self.num_embedded}_")
        self.rules.extend(part.rules)
        self.extra_terminals.extend(part.terminals)
        self.budgets.extend(part.token_budgets)
        self.aligned.update(part.token_aligned)
        return (part.start,)

    # -- dispatch on the format type ---------------------------------------------------------

    def format(self, fmt: Any, path: str, ends: tuple[str, ...] | None) -> Fragment:
        """Return the fragment of one format.

        ``ends`` are the end strings of the innermost enclosing tag (None at the top level):
        free text inside the tag never contains them.
        """
        if not isinstance(fmt, Mapping):
            raise GrammarError(f"a format is a JSON object, got {fmt!r}", path)
        kind = fmt.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            return handler(self, fmt, path, ends)
        if kind == "qwen_xml_parameter":  # XGrammar's older spelling of style 'qwen_xml'
            return self.json_schema({**fmt, "style": "qwen_xml"}, path, ends)
        known = ", ".join(sorted(_HANDLERS))
        raise GrammarError(f"unknown format type {kind!r}; supported: {known}", path)

    def token(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        """One special token, by id or by its string (resolved when the grammar is compiled)."""
        return (self.token_term(self.token_ref(fmt.get("token"), f"{path}/token")),)

    def const_string(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        return self.literal(_field(fmt, "value", str, path))

    def regex(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        from constrain.errors import RegexError
        from constrain.frontends.regex import parse_regex

        pattern = _field(fmt, "pattern", str, path)
        try:
            regex = parse_regex(pattern, flavor="ecmascript")
        except RegexError as err:
            raise GrammarError(f"invalid regex: {err}", f"{path}/pattern") from err
        return (self.term(regex),)

    def json_schema(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        from constrain.frontends.gemma_json import gemma_grammar
        from constrain.frontends.xml_arguments import STYLES, xml_arguments_grammar
        from constrain.frontends.xml_elements import ELEMENT_STYLES, xml_elements_grammar

        style = fmt.get("style", "json")
        known = ("json", *STYLES, *ELEMENT_STYLES, "gemma")
        if style not in known:
            only = ", ".join(repr(s) for s in known)
            raise GrammarError(f"style {style!r} is not supported: only {only}", f"{path}/style")
        excludes = _strings(fmt.get("excludes", []), f"{path}/excludes")
        any_order = _optional_bool(fmt, "any_order", path)
        if (any_order or excludes) and style != "json":
            raise GrammarError(f"any_order or excludes with style {style!r}: not supported", path)
        schema = _field(fmt, "json_schema", (dict, bool), path)
        max_ws = fmt.get("max_whitespace_cnt")
        if style == "gemma":
            where = f"{path}/json_schema"
            return self.add_embedded(gemma_grammar(schema, max_ws, where, xgrammar_json_schema))
        if style in ELEMENT_STYLES:
            where = f"{path}/json_schema"
            return self.add_embedded(
                xml_elements_grammar(style, schema, max_ws, where, xgrammar_json_schema)
            )
        if style != "json":
            where = f"{path}/json_schema"
            return self.add_embedded(
                xml_arguments_grammar(style, schema, max_ws, where, xgrammar_json_schema)
            )
        where = f"{path}/json_schema"
        return self.add_embedded(
            xgrammar_json_schema(schema, max_ws, where, any_order=any_order, excludes=excludes)
        )

    def grammar_format(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        from constrain.errors import LarkGrammarError

        text = _field(fmt, "grammar", str, path)
        syntax = fmt.get("syntax", "ebnf")
        if syntax not in ("ebnf", "lark"):
            raise GrammarError(f"syntax is 'ebnf' or 'lark', not {syntax!r}", f"{path}/syntax")
        try:
            grammar = Grammar.from_lark(text) if syntax == "lark" else Grammar.from_ebnf(text)
        except LarkGrammarError as err:
            raise GrammarError(f"invalid Lark grammar: {err}", f"{path}/grammar") from err
        except GrammarError as err:  # EBNF: "line L, column C" within the grammar
            raise GrammarError(str(err), f"{path}/grammar") from err
        return self.add_embedded(grammar)

    def any_text(self, fmt: Mapping[str, Any], path: str, ends: tuple[str, ...] | None) -> Fragment:
        excludes = _strings(fmt.get("excludes", []), f"{path}/excludes")
        max_chars = fmt.get("max_chars")
        if max_chars is not None:
            max_chars = _field(fmt, "max_chars", int, path)
        return self.budgeted(free_text([*excludes, *(ends or ())], max_chars), fmt, path)

    def sequence(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        elements = _field(fmt, "elements", list, path)
        out: list[str] = []
        for i, element in enumerate(elements):
            out.extend(self.format(element, f"{path}/elements/{i}", ends))
        return tuple(out)

    def or_format(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        elements = _field(fmt, "elements", list, path)
        if not elements:
            raise GrammarError("'or' needs at least one element", f"{path}/elements")
        alts = [self.format(e, f"{path}/elements/{i}", ends) for i, e in enumerate(elements)]
        return (self.rule(alts),)

    def tag(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        begin, end = fmt.get("begin"), fmt.get("end")
        if isinstance(begin, Mapping) or isinstance(end, Mapping):  # special tokens around it
            parts = []
            for key, value in (("begin", begin), ("end", end)):
                if isinstance(value, Mapping):
                    if value.get("type") != "token":
                        raise GrammarError(
                            f"a tag's {key} is a string or a 'token' format", f"{path}/{key}"
                        )
                    parts.append(self.token(value, f"{path}/{key}", ends))
                else:
                    parts.append(self.literal(_field(fmt, key, str, path)))
            strings = tuple(v for v in (end,) if isinstance(v, str) and v)
            if end == "" and _is_unbounded(fmt.get("content")):
                raise GrammarError(
                    "the tag's content is free text, so its end must not be empty", f"{path}/end"
                )
            saved = self.end_token
            self.end_token = (
                self.token_ref(end.get("token"), f"{path}/end/token")
                if (isinstance(end, Mapping))
                else None
            )
            try:
                body = self.format(fmt.get("content"), f"{path}/content", strings)
            finally:
                self.end_token = saved
            return (*parts[0], *body, *parts[1])
        text, body = self.tag_parts(fmt, path)
        return (*self.literal(text), *body)

    def tag_parts(self, fmt: Any, path: str) -> tuple[str, Fragment]:
        """Return a tag's begin string and the fragment of its content and end."""
        if not isinstance(fmt, Mapping) or fmt.get("type", "tag") != "tag":
            raise GrammarError("expected a format of type 'tag'", path)
        if isinstance(fmt.get("begin"), Mapping) or isinstance(fmt.get("end"), Mapping):
            raise GrammarError(
                "a tag whose begin or end is a 'token' format is read as a plain 'tag' only, "
                "not among the tags of triggered_tags or tags_with_separator",
                path,
            )
        begin = _field(fmt, "begin", str, path)
        raw_end = _field(fmt, "end", (str, list), path)
        ends = [raw_end] if isinstance(raw_end, str) else _strings(raw_end, f"{path}/end")
        if not ends:
            raise GrammarError("'end' needs at least one string", f"{path}/end")
        content = fmt.get("content")
        if not any(ends) and _is_unbounded(content):
            raise GrammarError(
                "the tag's content is free text, so at least one end string must be non-empty",
                f"{path}/end",
            )
        inner = tuple(e for e in ends if e)
        saved, self.end_token = self.end_token, None
        try:
            body = self.format(content, f"{path}/content", inner)
        finally:
            self.end_token = saved
        if len(ends) == 1:
            end = self.literal(ends[0])
        else:
            end = (self.term(Alt(tuple(Literal(e) for e in dict.fromkeys(ends)))),)
            if "" in ends:
                end = (self.rule([end, ()]),)
        return begin, (*body, *end)

    def triggered_tags(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        triggers = _strings(_field(fmt, "triggers", list, path), f"{path}/triggers")
        if not triggers or not all(triggers):
            raise GrammarError("triggers must be non-empty strings", f"{path}/triggers")
        tags = _field(fmt, "tags", list, path)
        excluded = [*_strings(fmt.get("excludes", []), f"{path}/excludes"), *(ends or ())]
        groups: dict[str, list[Fragment]] = {t: [] for t in triggers}
        direct: list[Fragment] = []
        for i, tag in enumerate(tags):
            where = f"{path}/tags/{i}"
            begin, body = self.tag_parts(tag, where)
            matched = [t for t in groups if begin.startswith(t)]
            if len(matched) != 1:
                problem = "no trigger" if not matched else f"several triggers {matched}"
                raise GrammarError(
                    f"the tag's begin {begin!r} starts with {problem}; each tag must be "
                    "matched by exactly one trigger (a prefix of its begin)",
                    f"{where}/begin",
                )
            groups[matched[0]].append((*self.literal(begin[len(matched[0]) :]), *body))
            direct.append((*self.literal(begin), *body))
        for j, (trigger, bodies) in enumerate(groups.items()):
            if not bodies:
                raise GrammarError(f"trigger {trigger!r} begins no tag", f"{path}/triggers/{j}")
        at_least_one = _optional_bool(fmt, "at_least_one", path)
        stop_after_first = _optional_bool(fmt, "stop_after_first", path)
        if at_least_one and stop_after_first:
            return (self.rule(direct),)
        loop = self.dispatch_rule(groups, excluded, loop=not stop_after_first)
        if at_least_one:  # XGrammar: the first tag comes at once, free text only after it
            return (self.rule([(*d, loop) for d in direct]),)
        return (loop,)

    def dispatch_rule(
        self, groups: Mapping[str, list[Fragment]], excluded: list[str], *, loop: bool
    ) -> str:
        """Return the rule of free text dispatching on triggers: ``FREE | until(t) group ...``.

        ``groups[t]`` are the fragments that may follow trigger ``t``; with ``loop`` free text
        resumes after each of them, otherwise the rule ends there.
        """
        triggers = list(groups)
        name = self.fresh()
        alts: list[Fragment] = [(self.term(free_text([*triggers, *excluded])),)]
        for trigger, fragments in groups.items():
            head = self.term(until_first(trigger, triggers, excluded))
            alts.extend((head, *f, *((name,) if loop else ())) for f in fragments)
        return self.rule(alts, name)

    def dispatch(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        rules = _field(fmt, "rules", list, path)
        groups: dict[str, list[Fragment]] = {}
        for i, pair in enumerate(rules):
            where = f"{path}/rules/{i}"
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[0]):
                raise GrammarError("a dispatch rule is a [pattern, format] pair", where)
            if not isinstance(pair[0], str):
                raise GrammarError("the pattern must be a non-empty string", f"{where}/0")
            groups.setdefault(pair[0], []).append(self.format(pair[1], f"{where}/1", ends))
        excluded = [*_strings(fmt.get("excludes", []), f"{path}/excludes"), *(ends or ())]
        loop = _field(fmt, "loop", bool, path) if "loop" in fmt else True
        return (self.dispatch_rule(groups, excluded, loop=loop),)

    def tags_with_separator(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        tags = _field(fmt, "tags", list, path)
        separator = self.literal(_field(fmt, "separator", str, path))
        alts = []
        for i, tag in enumerate(tags):
            begin, body = self.tag_parts(tag, f"{path}/tags/{i}")
            alts.append((*self.literal(begin), *body))
        if not alts:
            raise GrammarError("tags_with_separator needs at least one tag", f"{path}/tags")
        one = self.rule(alts)
        at_least_one = _optional_bool(fmt, "at_least_one", path)
        if _optional_bool(fmt, "stop_after_first", path):
            return (one,) if at_least_one else (self.rule([(one,), ()]),)
        rest = self.fresh()
        self.rule([(), (*separator, one, rest)], rest)
        return (one, rest) if at_least_one else (self.rule([(one, rest), ()]),)

    def any_tokens(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        """Any text and special tokens, but the excluded ones and the enclosing tag's end."""
        excluded = self.token_refs(fmt, "exclude_tokens", path)
        excluded += [self.end_token] if self.end_token is not None else []
        return self.free_tokens(excluded, path, fmt)

    def token_triggered_tags(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        """Free tokens until a trigger token, then a tag that begins with it; repeated."""
        triggers = self.token_refs(fmt, "trigger_tokens", path)
        if not triggers:
            raise GrammarError("trigger_tokens must be non-empty", f"{path}/trigger_tokens")
        tags = _field(fmt, "tags", list, path)
        if not tags:
            raise GrammarError("token_triggered_tags needs at least one tag", f"{path}/tags")
        groups: dict[TokenRef, list[Fragment]] = {t: [] for t in triggers}
        direct: list[Fragment] = []
        for i, tag in enumerate(tags):
            where = f"{path}/tags/{i}"
            begin = tag.get("begin") if isinstance(tag, Mapping) else None
            if not isinstance(begin, Mapping) or begin.get("type") != "token":
                raise GrammarError(
                    "a tag of token_triggered_tags begins with a 'token' format", f"{where}/begin"
                )
            ref = self.token_ref(begin.get("token"), f"{where}/begin/token")
            if ref not in groups:
                raise GrammarError(
                    "the tag's begin token is none of trigger_tokens (written the same way: "
                    "both by id or both by string)",
                    f"{where}/begin",
                )
            fragment = self.tag(tag, where, ends)
            groups[ref].append(fragment[1:])
            direct.append(fragment)
        at_least_one = _optional_bool(fmt, "at_least_one", path)
        stop_after_first = _optional_bool(fmt, "stop_after_first", path)
        if at_least_one and stop_after_first:
            return (self.rule(direct),)
        excluded = [*triggers, *self.token_refs(fmt, "exclude_tokens", path)]
        excluded += [self.end_token] if self.end_token is not None else []
        loop = self.token_dispatch_rule(groups, excluded, path, loop=not stop_after_first)
        if at_least_one:
            return (self.rule([(*d, loop) for d in direct]),)
        return (loop,)

    def token_dispatch_rule(
        self,
        groups: Mapping[TokenRef, list[Fragment]],
        excluded: list[TokenRef],
        path: str,
        *,
        loop: bool,
    ) -> str:
        """Return ``R: FREE | FREE trigger group [R]`` over token triggers."""
        name = self.fresh()
        free = self.free_tokens(excluded, path)
        alts: list[Fragment] = [free]
        for ref, fragments in groups.items():
            head = (*free, self.token_term(ref))
            alts.extend((*head, *f, *((name,) if loop else ())) for f in fragments)
        return self.rule(alts, name)

    def token_dispatch(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        """Free tokens; each trigger token is followed by its format."""
        rules = _field(fmt, "rules", list, path)
        if not rules:
            raise GrammarError("token_dispatch needs at least one rule", f"{path}/rules")
        groups: dict[TokenRef, list[Fragment]] = {}
        for i, pair in enumerate(rules):
            where = f"{path}/rules/{i}"
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
                raise GrammarError("a token_dispatch rule is a [token, format] pair", where)
            ref = self.token_ref(pair[0], f"{where}/0")
            groups.setdefault(ref, []).append(self.format(pair[1], f"{where}/1", ends))
        excluded = [*groups, *self.token_refs(fmt, "exclude_tokens", path)]
        loop = _field(fmt, "loop", bool, path) if "loop" in fmt else True
        return (self.token_dispatch_rule(groups, excluded, path, loop=loop),)

    def repeat(self, fmt: Mapping[str, Any], path: str, ends: Any) -> Fragment:
        kind = fmt["type"]
        low, high = {"optional": (0, 1), "star": (0, -1), "plus": (1, -1)}.get(kind, (0, 0))
        if kind == "repeat":
            low, high = _field(fmt, "min", int, path), _field(fmt, "max", int, path)
            if low < 0 or (high != -1 and high < low):
                raise GrammarError(
                    f"repeat bounds must be 0 <= min <= max, got {low}, {high}", path
                )
        body = self.format(fmt.get("content"), f"{path}/content", ends)
        tail: Fragment
        if high == -1:
            star = self.fresh()
            self.rule([(), (*body, star)], star)
            tail = (star,)
        else:
            tail = ()
            for _ in range(high - low):
                tail = (self.rule([(), (*body, *tail)]),)
        return (*(body * low), *tail)


def _is_unbounded(fmt: Any) -> bool:
    """Whether a format holds free text outside any nested tag (it needs an end string)."""
    if not isinstance(fmt, Mapping):
        return False
    kind = fmt.get("type")
    if kind in _UNBOUNDED:
        return True
    if kind in ("sequence", "or"):
        return any(_is_unbounded(e) for e in fmt.get("elements", ()))
    if kind in ("optional", "star", "plus", "repeat"):
        return _is_unbounded(fmt.get("content"))
    return False


_HANDLERS: dict[str, Callable[[_Builder, Mapping[str, Any], str, Any], Fragment]] = {
    "token": _Builder.token,
    "const_string": _Builder.const_string,
    "regex": _Builder.regex,
    "json_schema": _Builder.json_schema,
    "grammar": _Builder.grammar_format,
    "any_text": _Builder.any_text,
    "sequence": _Builder.sequence,
    "or": _Builder.or_format,
    "tag": _Builder.tag,
    "triggered_tags": _Builder.triggered_tags,
    "tags_with_separator": _Builder.tags_with_separator,
    "dispatch": _Builder.dispatch,
    "any_tokens": _Builder.any_tokens,
    "exclude_token": _Builder.exclude_token,
    "token_triggered_tags": _Builder.token_triggered_tags,
    "token_dispatch": _Builder.token_dispatch,
    "optional": _Builder.repeat,
    "star": _Builder.repeat,
    "plus": _Builder.repeat,
    "repeat": _Builder.repeat,
}
