"""Stage 1 (JSON Schema): the grammar of objects.

The object keywords of every piece of a conjunction are merged here. A *declared* property
(named in some ``properties`` or ``required``) gets the conjunction of every schema that applies
to it: ``properties[name]``, each ``patternProperties`` entry whose pattern it matches, and
``additionalProperties`` of a piece where neither applies; ``propertyNames`` filters the names.
Any other key falls into a *region*: the set of patterns it matches. Each region is one key
lexeme (the key strings that match exactly that set of patterns, are not declared and satisfy
``propertyNames``: an intersection of regular languages) with its own value rule.

Layout (see :mod:`~constrain.frontends.json_schema.emit`): declaration order by default,
optional properties skippable and additional ones after the declared ones; ``any_order=True``
tracks the set of declared properties already written, so any order is accepted, required ones
are enforced and none repeats (exact up to ``max_any_order_properties`` declared properties,
else :class:`~constrain.CompileLimitError`). ``minProperties``/``maxProperties`` count members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from constrain.errors import CompileLimitError, JsonSchemaError
from constrain.frontends.json_schema.counted import CHAIN_LIMIT, Alternative, Counted
from constrain.frontends.json_schema.patterns import check_pattern, pattern_dfa
from constrain.frontends.json_schema.shapes import SOME_KEY, Piece, non_negative_int
from constrain.ir import ANY_CHAR, Alt, Complement, Intersect, Literal, Regex, Repeat

if TYPE_CHECKING:
    from constrain.frontends.json_schema.emit import Emitter

__all__ = ["key_language", "object_alternatives", "pattern_matches"]


def key_language(
    names: list[str], patterns: list[Regex], negated: list[Regex], extra: list[Regex]
) -> Regex:
    """Return the key strings that are none of ``names``, match ``patterns`` and not ``negated``.

    Parameters
    ----------
    names : list of str
        Declared property names, excluded.
    patterns : list of Regex
        Key languages every key must be in (``patternProperties`` it matches).
    negated : list of Regex
        Key languages no key may be in (``patternProperties`` it does not match).
    extra : list of Regex
        Further languages every key must be in (``propertyNames``).

    Returns
    -------
    Regex
        The intersection (every string when nothing constrains the keys).
    """
    parts: list[Regex] = list(patterns) + list(extra)
    if names:
        parts.append(Complement(Alt(tuple(Literal(n) for n in names))))
    parts.extend(Complement(p) for p in negated)
    if not parts:
        return Repeat(ANY_CHAR, 0, None)
    return parts[0] if len(parts) == 1 else Intersect(tuple(parts))


def pattern_matches(keys: Regex, name: str) -> bool:
    """Return whether the key ``name`` is in the key language ``keys``.

    Parameters
    ----------
    keys : Regex
        A key language.
    name : str
        A property name.

    Returns
    -------
    bool
        Whether the UTF-8 bytes of ``name`` are in the language.
    """
    # Deferred: building a grammar must not import numba (test_front_ends_are_light).
    from constrain.automata.dfa import compile_regex

    return bool(compile_regex(keys).matches(name.encode()))


def _is_empty(regex: Regex) -> bool:
    # Deferred: building a grammar must not import numba (test_front_ends_are_light).
    from constrain.automata.dfa import compile_regex

    return compile_regex(regex).is_empty_language()


class _Merged:
    """The object keywords of a conjunction of pieces."""

    def __init__(self, em: Emitter, pieces: tuple[Piece, ...]) -> None:
        ctx = em.ctx
        self.em = em
        self.names: dict[str, None] = {}
        self.required: dict[str, None] = {}
        self.min_props = 0
        self.max_props: int | None = None
        # per piece: (properties, [(pattern, regex, sub piece)], additional piece or None)
        self.parts: list[
            tuple[Piece, dict[str, Any], list[tuple[str, Regex, Piece]], Piece | None]
        ] = []
        self.name_filters: list[Piece] = []
        self.some: list[tuple[Piece, dict[str, Any]]] = []
        for piece in pieces:
            s = piece.schema
            props = s.get("properties", {})
            if not isinstance(props, dict):
                raise JsonSchemaError("properties must be an object", piece.path + "/properties")
            self.names.update(dict.fromkeys(props))
            req = s.get("required", [])
            if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
                raise JsonSchemaError(
                    "required must be an array of strings", piece.path + "/required"
                )
            self.required.update(dict.fromkeys(req))
            self.min_props = max(
                self.min_props,
                non_negative_int(s.get("minProperties", 0), piece.path + "/minProperties"),
            )
            if "maxProperties" in s:
                m = non_negative_int(s["maxProperties"], piece.path + "/maxProperties")
                self.max_props = m if self.max_props is None else min(self.max_props, m)
            patterns = []
            for pat, sub in (s.get("patternProperties") or {}).items():
                pointer = f"{piece.path}/patternProperties"
                patterns.append(
                    (
                        pat,
                        check_pattern(pat, pointer),
                        ctx.child(piece, sub, "patternProperties", pat),
                    )
                )
            additional = None
            if "additionalProperties" in s:
                additional = ctx.child(piece, s["additionalProperties"], "additionalProperties")
            for spec in s.get(SOME_KEY, []):
                self.some.append((piece, spec))
            if "propertyNames" in s:
                self.name_filters.append(ctx.child(piece, s["propertyNames"], "propertyNames"))
            self.parts.append((piece, props, patterns, additional))
        self.names.update(self.required)

    def conj(self, name: str) -> tuple[Piece, ...] | None:
        """Return the schemas a declared property's value satisfies (None: name forbidden)."""
        ctx = self.em.ctx
        if self.name_filters and not ctx.is_valid(name, tuple(self.name_filters)):
            return None
        out: list[Piece] = []
        for piece, props, patterns, additional in self.parts:
            matched = False
            if name in props:
                out.append(ctx.child(piece, props[name], "properties", name))
                matched = True
            for pat, _, sub in patterns:
                if pattern_dfa(pat).matches(name.encode()):
                    out.append(sub)
                    matched = True
            if not matched and additional is not None:
                out.append(additional)
        if any(p.schema is False for p in out):
            return None
        return tuple(p for p in out if p.schema is not True)

    def name_language(self) -> Regex | None:
        """Return the key strings ``propertyNames`` allows (None: any string)."""
        if not self.name_filters:
            return None
        ctx = self.em.ctx
        parts: list[Regex] = []
        for shape in ctx.shapes(tuple(self.name_filters)):
            if shape.values is not None:
                parts.extend(
                    Literal(v)
                    for v in shape.values
                    if isinstance(v, str) and ctx.is_valid(v, shape.pieces)
                )
            elif shape.strs is not None:
                if not shape.str_exact:
                    ctx.unsupported("propertyNames with a format", self.name_filters[0].path)
                if not shape.strs:
                    parts.append(Repeat(ANY_CHAR, 0, None))
                else:
                    parts.append(shape.strs[0] if len(shape.strs) == 1 else Intersect(shape.strs))
        return Alt(tuple(parts))

    def witnesses(self) -> list[tuple[Regex, Piece]]:
        """Return the "some member" requirements (complements of object keywords).

        Each is the key language and the value schema of a member the object must have.
        """
        ctx = self.em.ctx
        out: list[tuple[Regex, Piece]] = []
        for piece, spec in self.some:
            parts: list[Regex] = []
            excluded = [n for n in spec.get("except", []) if isinstance(n, str)]
            if excluded:
                parts.append(Complement(Alt(tuple(Literal(n) for n in excluded))))
            parts.extend(
                Complement(check_pattern(pat, piece.path))
                for pat in spec.get("except_patterns", [])
            )
            if "pattern" in spec:
                parts.append(check_pattern(spec["pattern"], piece.path))
            keys = Repeat(ANY_CHAR, 0, None) if not parts else Intersect(tuple(parts))
            out.append((keys, ctx.child(piece, spec.get("value", True), "some")))
        if len(out) > 2:
            raise CompileLimitError(
                "max_witnesses", 2, len(out), "too many negated object keywords on one object"
            )
        return out

    def regions(self) -> list[tuple[Regex, tuple[Piece, ...]]]:
        """Key languages of the undeclared keys, each with the schemas of its values."""
        patterns = [(i, p) for i, part in enumerate(self.parts) for p in part[2]]
        if len(patterns) > 6:
            raise CompileLimitError(
                "max_pattern_properties",
                6,
                len(patterns),
                "too many patternProperties on one object",
            )
        names = list(self.names)
        extra = self.name_language()
        out = []
        for mask in range(1 << len(patterns)):
            chosen = [p for k, p in enumerate(patterns) if mask >> k & 1]
            others = [p for k, p in enumerate(patterns) if not mask >> k & 1]
            values = [sub for _, (_, _, sub) in chosen]
            hit = {i for i, _ in chosen}
            for i, (_, _, _, additional) in enumerate(self.parts):
                if i not in hit and additional is not None:
                    values.append(additional)
            if any(v.schema is False for v in values):
                continue
            lang = key_language(
                names,
                [regex for _, (_, regex, _) in chosen],
                [regex for _, (_, regex, _) in others],
                [] if extra is None else [extra],
            )
            # without patterns or propertyNames the language is "any string but the declared
            # names": a finite set's complement, never empty (no automaton needed to say so)
            if (patterns or extra is not None) and _is_empty(lang):
                continue
            out.append((lang, tuple(v for v in values if v.schema is not True)))
        return out


def object_alternatives(em: Emitter, pieces: tuple[Piece, ...]) -> list[Alternative]:
    """Return the alternatives of the rule of the objects satisfying every piece.

    Parameters
    ----------
    em : Emitter
        The grammar under construction.
    pieces : tuple of Piece
        Schemas whose object keywords all apply.

    Returns
    -------
    list of tuple of str
        Alternatives (symbol sequences) of the object rule.
    """
    merged = _Merged(em, pieces)
    lo, hi = merged.min_props, merged.max_props
    if hi is not None and hi < lo:
        return []
    declared: list[tuple[str, tuple[Piece, ...]]] = []
    for name in merged.names:
        conj = merged.conj(name)
        if conj is None:
            if name in merged.required:
                return []
            continue
        declared.append((name, conj))
    regions = merged.regions()
    cap = max(1, lo, (hi + 1) if hi is not None else 0)
    witnesses = merged.witnesses()
    # Without witnesses, the members past the declared ones are one unit, counted in binary
    # (counted.py) when the count is large; in declaration order only.
    binary = not witnesses and not em.options.any_order and cap - len(declared) > CHAIN_LIMIT
    if binary:
        cap = len(declared) + 1
    if cap > em.options.max_repeat:
        raise CompileLimitError(
            "max_repeat", em.options.max_repeat, cap, "minProperties/maxProperties are too large"
        )
    open_t = em.lexeme(Literal("{"))
    close_t = em.lexeme(Literal("}"))
    required = {i for i, (name, _) in enumerate(declared) if name in merged.required}
    key = tuple(p.key() for p in pieces)
    done = (1 << len(witnesses)) - 1
    # Member options: (key language, value schemas, witness bits the member sets).
    named: list[list[tuple[Regex, tuple[Piece, ...], int]]] = []
    for name, conj in declared:
        opts = [(cast(Regex, Literal(name)), conj, 0)]
        opts += [
            (Literal(name), (*conj, value), 1 << w)
            for w, (keys, value) in enumerate(witnesses)
            if pattern_matches(keys, name)
        ]
        named.append(opts)
    extra_opts = [(lang, conj, 0) for lang, conj in regions]
    extra_opts += [
        (Intersect((lang, keys)), (*conj, value), 1 << w)
        for w, (keys, value) in enumerate(witnesses)
        for lang, conj in regions
    ]

    if not em.options.any_order:
        counts = (lo, hi, cap)
        rules = _Members(em, key, counts, named, extra_opts, required, done, close_t, binary)
        return [(open_t, rules.ordered(0, 0, 0))]
    limit = em.options.max_any_order_properties
    if len(declared) > limit:
        raise CompileLimitError(
            "max_any_order_properties",
            limit,
            len(declared),
            "any_order=True tracks which properties were written, exponential in their number; "
            "use any_order=False (declaration order) or raise max_any_order_properties",
        )
    rules = _Members(em, key, (lo, hi, cap), named, extra_opts, required, done, close_t)
    return [(open_t, rules.unordered(0, 0, 0))]


_MemberOption = tuple[Regex, tuple[Piece, ...], int]  # key language, value schemas, witness bits


class _Members:
    """The rules of an object's members after its ``{``: in declaration order, or in any order.

    Methods, not nested functions that call themselves: such a function is a reference cycle
    (function, closure cell, function) that would hold the emitter, and with it every rule and
    regex of the grammar, until the cyclic garbage collector ran. Each rule reaches the
    emitter's queue as a lambda over this object, dropped once the emitter has built it.
    """

    def __init__(
        self,
        em: Emitter,
        key: tuple[Any, ...],
        counts: tuple[int, int | None, int],
        named: list[list[_MemberOption]],
        extra_opts: list[_MemberOption],
        required: set[int],
        done: int,
        close_t: str,
        binary: bool = False,
    ) -> None:
        self.em, self.key = em, key
        self.lo, self.hi, self.cap = counts  # minProperties, maxProperties, counted up to
        self.named, self.extra_opts, self.required = named, extra_opts, required
        self.done, self.close_t = done, close_t
        self.binary = binary  # the members past the declared ones are one unit, counted in binary
        self.counted: list[Counted] = []  # that unit's counter, built once
        self.full_required = sum(1 << i for i in required)

    def member(self, content: Regex, conj: tuple[Piece, ...], first: bool) -> tuple[str, ...]:
        return self.em.member_symbols(content, conj, first)

    def more(self, c: int) -> list[Alternative]:
        """Members after ``c`` written ones, counted in binary, then ``}``."""
        lo, hi = self.lo, self.hi
        if not self.extra_opts:
            return [(self.close_t,)] if c >= lo else []
        if not self.counted:
            em, key = self.em, self.key
            units = [self.member(content, conj, False) for content, conj, _ in self.extra_opts]
            unit = units[0] if len(units) == 1 else (em.rule(("om", key), lambda _: units),)
            self.counted.append(Counted(em.rule, ("om", key), unit))
        count = self.counted[0].between(max(lo - c, 0), None if hi is None else hi - c)
        return [(*count, self.close_t)]

    def ordered(self, i: int, c: int, f: int) -> str:
        """Return the rule after ``c`` members, ``i`` declared passed, witnesses ``f``."""
        return self.em.rule(("oo", self.key, i, c, f), lambda _: self._ordered(i, c, f))

    def _ordered(self, i: int, c: int, f: int) -> list[Alternative]:
        lo, hi, cap, named = self.lo, self.hi, self.cap, self.named
        if self.binary and i == len(named) and c > 0:
            return self.more(c)
        alts: list[Alternative] = []
        room = hi is None or c < hi
        if i < len(named):
            if room:
                for content, conj, bit in named[i]:
                    nxt = self.ordered(i + 1, min(c + 1, cap), f | bit)
                    alts.append((*self.member(content, conj, c == 0), nxt))
            if i not in self.required:
                alts.append((self.ordered(i + 1, c, f),))
            return alts
        if c >= lo and f == self.done:
            alts.append((self.close_t,))
        if room:
            for content, conj, bit in self.extra_opts:
                nxt = self.ordered(i, min(c + 1, cap), f | bit)
                alts.append((*self.member(content, conj, c == 0), nxt))
        return alts

    def unordered(self, seen: int, extra: int, f: int) -> str:
        """Return the rule after declared members ``seen``, ``extra`` others, witnesses ``f``."""
        return self.em.rule(
            ("ou", self.key, seen, extra, f), lambda _: self._unordered(seen, extra, f)
        )

    def _unordered(self, seen: int, extra: int, f: int) -> list[Alternative]:
        lo, hi = self.lo, self.hi
        count = bin(seen).count("1") + extra
        alts: list[Alternative] = []
        if seen & self.full_required == self.full_required and count >= lo and f == self.done:
            alts.append((self.close_t,))
        if hi is not None and count >= hi:
            return alts
        for j, options in enumerate(self.named):
            if not seen >> j & 1:
                for content, conj, bit in options:
                    nxt = self.unordered(seen | 1 << j, extra, f | bit)
                    alts.append((*self.member(content, conj, count == 0), nxt))
        for content, conj, bit in self.extra_opts:
            nxt = self.unordered(seen, min(extra + 1, self.cap), f | bit)
            alts.append((*self.member(content, conj, count == 0), nxt))
        return alts
