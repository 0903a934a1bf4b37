"""Stage 1 (JSON Schema): emit the Grammar IR for a schema's normal form.

One rule per distinct conjunction of schema pieces (so ``$ref`` recursion is a recursive rule,
never an unrolling), with these lexemes, each followed by the layout's bounded whitespace:

- one terminal per value position holding every scalar the position allows (``null``,
  booleans, numbers, strings: a single lexeme, so the lexer, not the parser, separates them);
- ``{`` and ``[``, ``}`` and ``]``, ``,`` between array items;
- one terminal per object key *with* its colon and, after the first key, the comma before it
  (``,"name":``), so an object member costs the parser two lexemes.

Arrays are counted by position (``prefixItems``, ``minItems``/``maxItems``) and by matches of
``contains``; objects keep declaration order (``any_order=False``: declared properties in order,
optional ones skippable, then additional properties) or any order (``any_order=True``: the set
of properties seen so far is part of the rule, so required ones are enforced and none repeats).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from constrain.errors import CompileLimitError, JsonSchemaError
from constrain.frontends.json_schema.counted import CHAIN_LIMIT, Alternative, Counted
from constrain.frontends.json_schema.logic import number_language, value_number_text
from constrain.frontends.json_schema.normal_form import NormalForm
from constrain.frontends.json_schema.objects import object_alternatives
from constrain.frontends.json_schema.shapes import (
    JsonSchemaOptions,
    NumC,
    Piece,
    Shape,
    json_equal_key,
    non_negative_int,
)
from constrain.frontends.json_schema.strings import quoted, quoted_text, whitespace_regex
from constrain.ir import (
    ANY_CHAR,
    NOTHING,
    Alt,
    CharSet,
    Concat,
    Grammar,
    Intersect,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
)

__all__ = ["NUMBER_DIGITS_NOTE", "Emitter", "compile_json_schema", "digit_bound"]

NUMBER_DIGITS_NOTE = "(max_number_digits)"
"""How a warning about ``max_number_digits`` ends (the other warnings name keywords not
enforced)."""


_BUSY = object()

# python_compatible: integers written plainly (pydantic also reads "11.0" or "1e3" as integers,
# but a generator has no business writing them, and a fraction is where a small model runs
# away with "11.0000..."), other numbers within float64 range.
_DIGIT = CharSet(((48, 57),))
_SIGN = Repeat(Literal("-"), 0, 1)
_EXP = CharSet(((69, 69), (101, 101)))
_FRACTION = Concat((Literal("."), Repeat(_DIGIT, 1, None)))


INTEGER_TEXT: Regex = Concat(
    (_SIGN, Alt((Literal("0"), Concat((CharSet(((49, 57),)), Repeat(_DIGIT, 0, None))))))
)
FLOAT64: Regex = Alt(
    (
        # up to 150 integer digits and a two-digit exponent: below 1e250
        Concat(
            (
                _SIGN,
                Alt((Literal("0"), Concat((CharSet(((49, 57),)), Repeat(_DIGIT, 0, 149))))),
                Repeat(_FRACTION, 0, 1),
                Repeat(
                    Concat(
                        (
                            _EXP,
                            Alt(
                                (
                                    Concat((Repeat(Literal("+"), 0, 1), Repeat(_DIGIT, 1, 2))),
                                    Concat((Literal("-"), Repeat(_DIGIT, 1, None))),
                                )
                            ),
                        )
                    ),
                    0,
                    1,
                ),
            )
        ),
        # one-digit mantissa (as Python's repr writes floats) up to e+307
        Concat(
            (
                _SIGN,
                _DIGIT,
                Repeat(_FRACTION, 0, 1),
                _EXP,
                Repeat(Literal("+"), 0, 1),
                Alt(
                    (
                        Repeat(_DIGIT, 1, 2),
                        Concat((CharSet(((49, 50),)), _DIGIT, _DIGIT)),
                        Concat((Literal("30"), CharSet(((48, 55),)))),
                    )
                ),
            )
        ),
    )
)


def digit_bound(num: NumC, max_digits: int) -> tuple[Regex, bool]:
    r"""Return short plain number texts for ``num``, and whether they may exclude values.

    The texts are ``-?(0|[1-9][0-9]{0,I-1})(\.[0-9]{1,F})?`` (no exponent) with ``I`` and
    ``F`` equal to ``max_digits``, or one more digit than the schema's own bounds and multiples
    need where that is more, so a satisfiable number constraint stays satisfiable. Intersected
    with the number language, the result is a subset of the schema's language.

    Parameters
    ----------
    num : NumC
        The number constraints of one shape.
    max_digits : int
        The bound on integer digits and on fraction digits (``max_number_digits``).

    Returns
    -------
    tuple of Regex and bool
        The texts, and False only when the bound excludes no value of ``num`` (an integer
        bounded on both sides within ``10**I``).
    """
    need_int = need_frac = 0
    for bound in (num.lo, num.hi, *num.multiples):
        if bound is not None:
            parts = abs(bound).normalize().as_tuple()
            exponent, digits = int(parts.exponent), len(parts.digits)
            need_int = max(need_int, digits + exponent)
            need_frac = max(need_frac, -exponent)
    int_digits = max(max_digits, need_int + 1)
    frac_digits = max(max_digits, need_frac + 1)
    text = Concat(
        (
            _SIGN,
            Alt((Literal("0"), Concat((CharSet(((49, 57),)), Repeat(_DIGIT, 0, int_digits - 1))))),
            Repeat(Concat((Literal("."), Repeat(_DIGIT, 1, frac_digits))), 0, 1),
        )
    )
    limit = 10**int_digits
    bounded = (
        num.integer
        and num.lo is not None
        and num.hi is not None
        and max(abs(num.lo), abs(num.hi)) < limit
    )
    return text, not bounded


class Emitter:
    """Build the rules and terminals of one schema's grammar."""

    def __init__(self, ctx: NormalForm) -> None:
        self.ctx = ctx
        self.options = ctx.options
        mode = ctx.options.whitespace
        if mode not in ("compact", "flexible", "indent", "spaced"):
            raise ValueError(
                f"whitespace={mode!r}: choose 'compact', 'spaced', 'flexible' or 'indent'"
            )
        ws = None if mode == "spaced" else whitespace_regex(mode, ctx.options.max_whitespace, 2)
        self.ws: Regex | None = ws
        """Layout after every lexeme (None: none)."""
        self.comma: Regex
        """A comma with its layout (``,`` then ``ws``; ``", "`` in spaced mode)."""
        self.colon: Regex
        """A key's colon with its layout (``ws : ws``; ``": "`` in spaced mode)."""
        if mode == "spaced":  # json.dumps's default separators
            self.comma, self.colon = Literal(", "), Literal(": ")
        elif ws is None:
            self.comma, self.colon = Literal(","), Literal(":")
        else:
            self.comma = Concat((Literal(","), ws))
            self.colon = Concat((ws, Literal(":"), ws))
        digits = ctx.options.max_number_digits
        if digits is not None and (
            isinstance(digits, bool) or not isinstance(digits, int) or digits < 1
        ):
            raise ValueError(f"max_number_digits={digits!r}: give a positive int or None")
        self.rules: dict[str, list[Alternative]] = {}
        self.terminals: dict[Regex, str] = {}
        self.memo: dict[Any, str] = {}
        self.parts: dict[Any, object] = {}
        self.pending: dict[Any, list[str]] = {}
        self.queue: list[tuple[str, Callable[[str], list[Alternative]]]] = []

    # -- naming -------------------------------------------------------------------------------

    def token(self, regex: Regex) -> str:
        """Return the terminal for ``regex`` followed by the layout whitespace (interned)."""
        name = self.terminals.get(regex)
        if name is None:
            name = f"T{len(self.terminals)}"
            self.terminals[regex] = name
        return name

    def lexeme(self, regex: Regex) -> str:
        """Return the terminal of one lexeme: ``regex`` then the bounded whitespace."""
        return self.token(regex if self.ws is None else Concat((regex, self.ws)))

    def _name(self, key: Any) -> str:
        """Register a new rule under ``key`` (no alternatives yet) and return its name."""
        name = f"r{len(self.memo)}"
        self.memo[key] = name
        self.rules[name] = []
        if len(self.rules) > 200_000:
            raise CompileLimitError(
                "max_rules", 200_000, len(self.rules), "the schema's grammar is too large"
            )
        return name

    def rule(self, key: Any, build: Callable[[str], list[Alternative]]) -> str:
        """Return the rule memoised under ``key``; its body is built later by :meth:`drain`.

        Deferring the bodies keeps the Python stack flat however deep the schema nests.
        """
        name = self.memo.get(key)
        if name is None:
            name = self._name(key)
            self.queue.append((name, build))
        return name

    def drain(self) -> None:
        """Build every rule body still waiting (bodies may register more rules)."""
        while self.queue:
            name, build = self.queue.pop()
            self.rules[name] = build(name)

    # -- values -------------------------------------------------------------------------------

    def value(self, pieces: tuple[Piece, ...]) -> str:
        """Return the rule of the values satisfying every piece."""
        key = tuple(p.key() for p in pieces)
        name = self.memo.get(("v", key))
        if name is not None:
            return name
        name = self._name(("v", key))
        if self.parts.get(key) is _BUSY:  # filled in when value_parts(key) completes
            self.pending.setdefault(key, []).append(name)
        else:
            self.rules[name] = self._body(self.value_parts(pieces))
        return name

    def _body(self, parts: tuple[Regex | None, list[Alternative]]) -> list[Alternative]:
        scalar, alts = parts
        return ([(self.lexeme(scalar),)] if scalar is not None else []) + alts

    def value_parts(self, pieces: tuple[Piece, ...]) -> tuple[Regex | None, list[Alternative]]:
        """Return the values satisfying every piece as (scalar language, container rules).

        A position whose values are all scalars is a single regular language: callers fuse it
        with the lexeme before it (an object key, an array comma), so the lexer never has to
        tell this property's strings from another's (see the module docstring).
        """
        key = tuple(p.key() for p in pieces)
        hit = self.parts.get(key)
        if hit is _BUSY:  # a recursive reference to a value being built: use its rule
            return None, [(self.value(pieces),)]
        if hit is not None:
            return hit  # type: ignore[return-value]
        self.parts[key] = _BUSY
        result = self._shapes_parts(self.ctx.shapes(pieces))
        self.parts[key] = result
        for name in self.pending.pop(key, []):
            self.rules[name] = self._body(result)
        return result

    def shapes_rule(self, key: Any, shapes: Callable[[], list[Shape]]) -> str:
        """Return the rule of the values of a normal form computed on first use."""
        return self.rule(("s", key), lambda _: self._body(self._shapes_parts(shapes())))

    def _shapes_parts(self, shapes: list[Shape]) -> tuple[Regex | None, list[Alternative]]:
        scalars: list[Regex] = []
        alts: list[Alternative] = []
        for shape in shapes:
            if shape.values is not None:
                for value in self.ctx.valid_values(shape.values, shape.pieces):
                    if type(value) is str:  # the common case, inline: enums of many strings
                        scalars.append(quoted_text(value))
                    else:
                        self._const(value, shape.pieces[0], scalars, alts)
                continue
            if shape.null:
                scalars.append(Literal("null"))
            scalars.extend(Literal(json.dumps(b)) for b in sorted(shape.bools))
            if shape.num is not None:
                try:
                    lang = number_language(shape.num)
                    if shape.num.integer and self.ctx.plain_integers and lang != NOTHING:
                        lang = Intersect((lang, INTEGER_TEXT))
                    if self.options.python_compatible and lang != NOTHING:
                        lang = Intersect((lang, INTEGER_TEXT if shape.num.integer else FLOAT64))
                    if self.options.max_number_digits is not None and lang != NOTHING:
                        lang = self._bound_digits(lang, shape)
                    scalars.append(lang)
                except CompileLimitError as err:  # say where in the schema
                    where = shape.pieces[0].path if shape.pieces else "#"
                    raise CompileLimitError(
                        err.limit_name, err.limit, err.value, f"{err} (at {where})"
                    ) from err
            if shape.strs is not None:
                content: Regex = Repeat(ANY_CHAR, 0, None)
                if shape.strs:
                    content = shape.strs[0] if len(shape.strs) == 1 else Intersect(shape.strs)
                scalars.append(quoted(content))
            if shape.arr is not None:
                alts.append((self.array(shape.arr),))
            if shape.obj is not None:
                alts.append((self.object(shape.obj),))
        scalars = [s for s in dict.fromkeys(scalars) if type(s) is Literal or s != NOTHING]
        scalar = None
        if scalars:
            scalar = scalars[0] if len(scalars) == 1 else Alt(tuple(scalars))
        return scalar, list(dict.fromkeys(alts))

    def _bound_digits(self, lang: Regex, shape: Shape) -> Regex:
        """Intersect a number language with :func:`digit_bound`; record a warning if it bites."""
        assert shape.num is not None and self.options.max_number_digits is not None
        texts, restricts = digit_bound(shape.num, self.options.max_number_digits)
        if restricts:
            where = shape.pieces[0].path if shape.pieces else "# (a value left open)"
            digits = self.options.max_number_digits
            note = (
                f"{where}: numbers written plainly, at most {digits} digits before and "
                f"{digits} after the point {NUMBER_DIGITS_NOTE}"
            )
            if note not in self.ctx.warnings:
                self.ctx.warnings.append(note)
        return Intersect((lang, texts))

    def _const(
        self, value: Any, anchor: Piece, scalars: list[Regex], alts: list[Alternative]
    ) -> None:
        if value is None or isinstance(value, bool):
            scalars.append(Literal(json.dumps(value)))
        elif isinstance(value, (int, float)):
            scalars.append(value_number_text(value))
        elif isinstance(value, str):
            scalars.append(quoted_text(value))
        else:
            alts.append(
                (
                    self.value(
                        (self.ctx.child(anchor, _const_schema(value, self.ctx.legacy), "const"),)
                    ),
                )
            )

    # -- arrays -------------------------------------------------------------------------------

    def array(self, pieces: tuple[Piece, ...]) -> str:
        """Return the rule of the arrays satisfying every piece's array keywords."""
        return self.rule(("a", tuple(p.key() for p in pieces)), lambda _: self._array(pieces))

    def _item(self, piece: Piece, index: int) -> Piece | None:
        """Return the schema of item ``index`` under ``piece`` (None: unconstrained)."""
        schema = piece.schema
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft 4-7 tuple form
            if index < len(items):
                return self.ctx.child(piece, items[index], "items", index)
            if "additionalItems" in schema:
                return self.ctx.child(piece, schema["additionalItems"], "additionalItems")
            return None
        if isinstance(prefix, list) and not self.ctx.legacy:
            if index < len(prefix):
                return self.ctx.child(piece, prefix[index], "prefixItems", index)
        if items is not None:
            return self.ctx.child(piece, items, "items")
        return None

    def _array(self, pieces: tuple[Piece, ...]) -> list[Alternative]:
        ctx = self.ctx
        lo, hi = 0, None
        fixed = 0
        contains: list[tuple[Piece, int, int | None]] = []
        unique: Piece | None = None
        for piece in pieces:
            s = piece.schema
            lo = max(lo, non_negative_int(s.get("minItems", 0), piece.path + "/minItems"))
            if "maxItems" in s:
                m = non_negative_int(s["maxItems"], piece.path + "/maxItems")
                hi = m if hi is None else min(hi, m)
            items = s.get("items")
            if isinstance(items, list):
                fixed = max(fixed, len(items))
            elif isinstance(s.get("prefixItems"), list) and not ctx.legacy:
                fixed = max(fixed, len(s["prefixItems"]))
            if "contains" in s:
                cmin = non_negative_int(s.get("minContains", 1), piece.path + "/minContains")
                cmax = s.get("maxContains")
                cmax_n = (
                    None if cmax is None else non_negative_int(cmax, piece.path + "/maxContains")
                )
                contains.append((ctx.child(piece, s["contains"], "contains"), cmin, cmax_n))
            if s.get("uniqueItems") is True and unique is None:
                unique = piece
        if len(contains) > 1:
            ctx.unsupported(
                "more than one contains on the same array", pieces[0].path + "/contains"
            )
            contains = contains[:1]

        def item_pieces(i: int) -> tuple[Piece, ...] | None:
            out: list[Piece] = []
            for piece in pieces:
                sub = self._item(piece, i)
                if sub is None:
                    continue
                if sub.schema is False:
                    return None
                out.append(sub)
            return tuple(out)

        if item_pieces(fixed) is None:  # no items past the fixed ones
            hi = fixed if hi is None else min(hi, fixed)
        domain: list[tuple[Any, set[int]]] = []  # uniqueItems: (value, positions allowing it)
        if unique is not None and (hi is None or hi > 1):
            found = None if contains else self._finite_items(item_pieces, fixed)
            if found is None:
                ctx.unsupported(
                    "uniqueItems is not supported for these items (exact only for items drawn "
                    "from at most 12 enum/const/boolean/null values)",
                    unique.path + "/uniqueItems",
                )
            else:
                domain = found
                hi = len(domain) if hi is None else min(hi, len(domain))
        if hi is not None and hi < lo:
            return []
        cmin, cmax = (contains[0][1], contains[0][2]) if contains else (0, None)
        if cmax is not None and cmax < cmin:
            return []
        # Items are counted exactly up to cap_i; past it (no maxItems) every state is the same.
        cap_i = max(fixed, lo, hi or 0, 1)
        cap_c = max(cmin, (cmax + 1) if cmax is not None else 0)
        # Past the fixed items, plain items (no contains, no uniqueItems) are one unit counted
        # in binary from t0 on when the count is large (counted.py).
        t0 = max(fixed, 1)
        binary = not contains and not domain and cap_i - t0 > CHAIN_LIMIT
        limit = self.options.max_repeat
        if binary:
            cap_i = t0
        if cap_i > limit or cap_c > limit or cap_i * (cap_c + 1) > 8 * limit:
            raise CompileLimitError(
                "max_repeat",
                limit,
                max(cap_i, cap_c),
                f"array bounds at {pieces[0].path} are too large to count exactly; lower "
                "minItems/maxItems/minContains/maxContains or raise max_repeat",
            )
        open_t, close_t = self.lexeme(Literal("[")), self.lexeme(Literal("]"))
        cpiece = contains[0][0] if contains else None

        def item_rules(i: int) -> list[tuple[Any, int]]:
            base = item_pieces(min(i, fixed))
            if base is None:
                return []
            if cpiece is None:
                return [(base, 0)]
            yes = self.value((*base, cpiece))
            no = self.shapes_rule(
                ("notc", tuple(p.key() for p in base), cpiece.key()),
                lambda: ctx.conjoin(
                    ctx.shapes(base), ctx.negate(ctx.shapes((cpiece,)), cpiece.path), cpiece.path
                ),
            )
            return [(yes, 1), (no, 0)]

        counts = (lo, hi, cmin, cmax, fixed, cap_i, cap_c)
        states = _ArrayStates(
            self, pieces, item_rules, close_t, counts, t0 if binary else -1, domain
        )
        return [(open_t, states.state(0, 0))]

    def _finite_items(
        self, item_pieces: Callable[[int], tuple[Piece, ...] | None], fixed: int
    ) -> list[tuple[Any, set[int]]] | None:
        """Return the finite item domain for uniqueItems (value, positions), or None."""
        found: dict[Any, tuple[Any, set[int]]] = {}
        for position in range(fixed + 1):
            base = item_pieces(position)
            if base is None:
                continue
            for shape in self.ctx.shapes(base):
                if shape.values is not None:
                    values = [v for v in shape.values if self.ctx.is_valid(v, shape.pieces)]
                elif shape.num is None and shape.strs is None and shape.arr is None:
                    if shape.obj is not None:
                        return None
                    values = ([None] if shape.null else []) + sorted(shape.bools)
                else:
                    return None
                for v in values:
                    found.setdefault(json_equal_key(v), (v, set()))[1].add(position)
                if len(found) > 12:
                    return None
        return list(found.values())

    def value_symbols(self, value: Any, anchor: Piece, after_comma: bool) -> tuple[str, ...]:
        """Return the symbols of one fixed array item (fused with its comma when scalar)."""
        scalars: list[Regex] = []
        alts: list[Alternative] = []
        self._const(value, anchor, scalars, alts)
        if scalars:
            regex = scalars[0]
            if after_comma:
                comma = self.comma
                regex = Concat((comma, regex))
            return (self.lexeme(regex),)
        rule = alts[0][0]
        return (self.token(self.comma), rule) if after_comma else (rule,)

    # -- objects ------------------------------------------------------------------------------

    def object(self, pieces: tuple[Piece, ...]) -> str:
        """Return the rule of the objects satisfying every piece's object keywords."""
        return self.rule(
            ("o", tuple(p.key() for p in pieces)), lambda _: object_alternatives(self, pieces)
        )

    def item_symbols(self, item: Any, after_comma: bool) -> tuple[str, ...]:
        """Return the symbols of one array item (a rule name, or pieces to fuse with the comma)."""
        if isinstance(item, str):
            return (self.token(self.comma), item) if after_comma else (item,)
        scalar, alts = self.value_parts(item)
        if scalar is not None and not alts:
            if not after_comma:
                return (self.lexeme(scalar),)
            comma = self.comma
            return (self.lexeme(Concat((comma, scalar))),)
        rule = self.value(item)
        return (self.token(self.comma), rule) if after_comma else (rule,)

    def member_symbols(
        self, content: Regex, conj: tuple[Piece, ...], first: bool
    ) -> tuple[str, ...]:
        """Return the symbols of one object member: key (with colon and comma) and value."""
        scalar, alts = self.value_parts(conj)
        if scalar is not None and not alts:
            return (self.lexeme(Concat((self.key_regex(content, first), scalar))),)
        return self.key_token(content, first), self.value(conj)

    def key_regex(self, content: Regex, first: bool) -> Regex:
        """Return the regex of an object key with its colon (and the comma before, if not first)."""
        colon = self.colon
        body = Concat((quoted(content), colon))
        if first:
            return body
        comma = self.comma
        return Concat((comma, body))

    def key_token(self, content: Regex, first: bool) -> str:
        """Return the terminal of an object key (``"k":``, or ``,"k":`` after the first)."""
        colon = self.colon
        body = Concat((quoted(content), colon))
        if first:
            return self.token(body)
        comma = self.comma
        return self.token(Concat((comma, body)))

    # -- grammar ------------------------------------------------------------------------------

    def grammar(self, root: str) -> Grammar:
        """Return the Grammar with start rule ``root``."""
        rules = [Rule("start", ((root,),))]
        rules += [Rule(name, tuple(alts)) for name, alts in self.rules.items()]
        terminals = tuple(Terminal(name, regex) for regex, name in self.terminals.items())
        return Grammar(rules=tuple(rules), terminals=terminals, start="start")


def _has_in_place_applicators(schema: dict[str, Any]) -> bool:
    return any(
        k in schema
        for k in ("allOf", "anyOf", "oneOf", "not", "if", "$ref", "dependentSchemas", "$dynamicRef")
    )


def _const_schema(value: Any, legacy: bool) -> dict[str, Any]:
    """Return a schema whose only instance is the array or object ``value``."""
    if isinstance(value, dict):
        return {
            "type": "object",
            "properties": {k: {"const": v} for k, v in value.items()},
            "required": list(value),
            "additionalProperties": False,
        }
    items = [{"const": v} for v in value]
    if legacy:
        return {"type": "array", "items": items, "additionalItems": False, "minItems": len(value)}
    return {"type": "array", "prefixItems": items, "items": False, "minItems": len(value)}


def compile_json_schema(schema: Any, options: JsonSchemaOptions) -> Grammar:
    """Return the grammar of the compact/flexible JSON texts of the instances of ``schema``.

    Parameters
    ----------
    schema : dict, bool or str
        The schema (JSON text is parsed first).
    options : JsonSchemaOptions
        Layout and strictness options.

    Returns
    -------
    Grammar
        The grammar; ``grammar.warnings`` lists what ``lenient=True`` did not enforce.

    Raises
    ------
    JsonSchemaError
        With the JSON pointer of a keyword that cannot be enforced, or when no value is valid.
    CompileLimitError
        When a configured limit is exceeded.
    """
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as err:
            raise JsonSchemaError(f"the schema is not valid JSON: {err}", "#") from err
    if not isinstance(schema, (dict, bool)):
        raise JsonSchemaError(
            f"a schema must be an object or a boolean, got {type(schema).__name__}", "#"
        )
    ctx = NormalForm(schema, options)
    em = Emitter(ctx)
    try:
        root = em.value((ctx.root,))
        em.drain()
    finally:  # an error leaves rules queued: their builders and the emitter hold each other
        em.queue.clear()
    if not em.rules[root]:
        raise JsonSchemaError("the schema accepts no JSON value", "#")
    grammar = em.grammar(root)
    return Grammar(
        rules=grammar.rules,
        terminals=grammar.terminals,
        start=grammar.start,
        _meta={"warnings": tuple(ctx.warnings), "source": "json_schema"},
    )


class _ArrayStates:
    """The rules of an array after its ``[``, per items written, contains matches, values used.

    Methods, not a nested function that calls itself: such a function is a reference cycle
    (function, closure cell, function) that would hold the emitter, and with it every rule and
    regex of the grammar, until the cyclic garbage collector ran.
    """

    def __init__(
        self,
        em: Emitter,
        pieces: tuple[Piece, ...],
        item_rules: Callable[[int], list[tuple[Any, int]]],
        close_t: str,
        counts: tuple[int, int | None, int, int | None, int, int, int],
        binary_from: int,
        domain: list[tuple[Any, set[int]]],
    ) -> None:
        self.em, self.pieces, self.item_rules, self.close_t = em, pieces, item_rules, close_t
        self.key = tuple(p.key() for p in pieces)
        # minItems, maxItems, minContains, maxContains, prefix items, the two counts' caps
        self.counts = counts
        self.binary_from = binary_from  # the items from here on are one unit counted in binary
        self.domain = domain  # uniqueItems: (value, positions allowing it)

    def state(self, i: int, c: int, used: int = 0) -> str:
        """Return the rule after ``i`` items, ``c`` matching ``contains``, values ``used``."""
        key = ("as", self.key, i, c, used)
        return self.em.rule(key, lambda _: self._build(i, c, used))

    def _build(self, i: int, c: int, used: int) -> list[Alternative]:
        em, close_t = self.em, self.close_t
        lo, hi, cmin, cmax, fixed, cap_i, cap_c = self.counts
        t0 = self.binary_from
        if i == t0:
            rule = self.item_rules(i)[0][0]
            unit = em.item_symbols(rule, True)
            more = Counted(em.rule, ("ai", self.key), unit)
            count = more.between(max(lo - t0, 0), None if hi is None else hi - t0)
            return [(*count, close_t)]
        alts: list[Alternative] = []
        if i >= lo and c >= cmin and (cmax is None or c <= cmax):
            alts.append((close_t,))
        if self.domain and (hi is None or i < hi):  # uniqueItems: each value at most once
            for k, (value, positions) in enumerate(self.domain):
                if not used >> k & 1 and min(i, fixed) in positions:
                    nxt = self.state(min(i + 1, cap_i), c, used | 1 << k)
                    alts.append((*em.value_symbols(value, self.pieces[0], i > 0), nxt))
            return alts
        if hi is None or i < hi:
            for rule, add in self.item_rules(i):
                ni = min(i + 1, cap_i)
                nc = min(c + add, cap_c)
                if cmax is not None and nc > cmax:
                    continue
                nxt = self.state(ni, nc)
                alts.append((*em.item_symbols(rule, i > 0), nxt))
        return alts
