"""The grammars shipped in grammars/*.lark, checked on the example corpora in tests/corpus/.

Corpus format: ``tests/corpus/<name>/{positive,negative}.txt`` hold examples separated by a line
that is exactly ``---``; the separator takes the ``\\n`` just before it and the file ends with one
``\\n`` (so an example may end with a line break, CR or blank line of its own). Files are read
byte-exact (``newline=""``): CSV examples contain CRLF on purpose.

Every example is run through Lark's own Earley parser (``lexer="dynamic"``) twice: on the
original ``.lark`` file and on the text ``Grammar.builtin(name).to_lark()`` prints from the IR.
Lark does not read constrain's ``%lexer basic`` line: it is dropped, so Lark checks the
non-greedy language, a superset; what greedy lexing adds is checked in
``tests/unit/test_greedy_lexer.py``. (Lark's own ``lexer="basic"`` is no reference for these
grammars: it tries terminals in a fixed order with ``re``, not the longest match, and reads
``SELECT`` as the identifier ``SELEC``.)
"""

from __future__ import annotations

import json
import random
import re
import string
from functools import cache
from pathlib import Path

import lark
import pytest
import reference

from constrain.frontends.lark import (
    builtin_grammar,
    builtin_names,
    parse_lark,
    without_option_lines,
)
from constrain.ir import Grammar

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
GRAMMARS = ROOT / "grammars"
NAMES = ["arithmetic", "csv", "json", "sql"]


load_examples = reference.load_examples


@cache
def lark_parser(name: str, printed: bool, ambiguity: str = "resolve") -> lark.Lark:
    text = builtin_grammar(name).to_lark() if printed else (GRAMMARS / f"{name}.lark").read_text()
    text = without_option_lines(text)  # constrain's %lexer and %ignore_at_end lines
    return lark.Lark(text, parser="earley", lexer="dynamic", ambiguity=ambiguity)


def accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def examples(kind: str) -> list[object]:
    return [
        pytest.param(name, i, ex, id=f"{name}-{i}")
        for name in NAMES
        for i, ex in enumerate(load_examples(CORPUS / name / f"{kind}.txt"))
    ]


def test_builtin_names_lists_every_grammar_file() -> None:
    assert builtin_names() == NAMES
    assert sorted(p.stem for p in GRAMMARS.glob("*.lark")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_corpus_size(name: str) -> None:
    positive = load_examples(CORPUS / name / "positive.txt")
    negative = load_examples(CORPUS / name / "negative.txt")
    assert len(positive) >= 30
    assert len(negative) >= 10
    assert len(set(positive)) == len(positive), "duplicate positive example"
    assert not set(positive) & set(negative)
    assert all(ex.strip() for ex in positive + negative), "empty example (test those in code)"


@pytest.mark.parametrize("printed", [False, True], ids=["file", "printed-ir"])
@pytest.mark.parametrize(("name", "index", "text"), examples("positive"))
def test_positive_examples_parse(name: str, index: int, text: str, printed: bool) -> None:
    assert accepts(lark_parser(name, printed), text), f"{name} positive #{index}: {text!r}"


@pytest.mark.parametrize("printed", [False, True], ids=["file", "printed-ir"])
@pytest.mark.parametrize(("name", "index", "text"), examples("negative"))
def test_negative_examples_are_rejected(name: str, index: int, text: str, printed: bool) -> None:
    assert not accepts(lark_parser(name, printed), text), f"{name} negative #{index}: {text!r}"


@pytest.mark.parametrize("name", NAMES)
def test_positive_examples_are_unambiguous(name: str) -> None:
    parser = lark_parser(name, False, "explicit")
    for text in load_examples(CORPUS / name / "positive.txt"):
        tree = parser.parse(text)
        if isinstance(tree, lark.Tree):
            assert not list(tree.find_data("_ambig")), f"ambiguous parse of {text!r}"


@pytest.mark.parametrize("name", NAMES)
def test_empty_input_is_rejected(name: str) -> None:
    assert not accepts(lark_parser(name, False), "")
    assert not accepts(lark_parser(name, True), "")


@pytest.mark.parametrize("name", NAMES)
def test_builtin_round_trip_is_idempotent(name: str) -> None:
    grammar = builtin_grammar(name)
    printed = grammar.to_lark()
    again = parse_lark(printed)
    assert again.to_lark() == printed
    assert parse_lark(again.to_lark()) == again
    assert Grammar.builtin(name) is grammar  # cached, shared (the IR is immutable)


def test_unknown_builtin_lists_available_names() -> None:
    with pytest.raises(ValueError, match=r"'yaml'.*arithmetic, csv, json, sql"):
        builtin_grammar("yaml")
    with pytest.raises(ValueError, match="available"):
        Grammar.builtin("../grammars/json")


# -- JSON: cross-checked against Python's json module ------------------------------------------


def _random_json(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([True, False, None])
    if kind == 1:
        return rng.randint(-(10**12), 10**12)
    if kind == 2:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-30, 30)
    if kind in (3, 4):
        alphabet = string.printable + "\u00e9\u4e2d\U0001f600\x00\x1f\x7f\u2028"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
    if kind == 5:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        str(_random_json(rng, 3)): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))
    }


def test_json_corpus_agrees_with_python_json() -> None:
    for text in load_examples(CORPUS / "json" / "positive.txt"):
        json.loads(text)
    for text in load_examples(CORPUS / "json" / "negative.txt"):
        if "NaN" in text:
            continue  # Python's json module accepts NaN and Infinity; RFC 8259 does not
        with pytest.raises(ValueError):
            json.loads(text)


def test_json_accepts_what_json_dumps_writes() -> None:
    rng = random.Random(8259)
    parser = lark_parser("json", True)
    for _ in range(150):
        value = _random_json(rng)
        for text in (
            json.dumps(value),
            json.dumps(value, ensure_ascii=False),
            json.dumps(value, indent=rng.choice([1, 2, "\t"])),
        ):
            assert accepts(parser, text), text


@pytest.mark.parametrize(
    ("number", "ok"),
    [("0", True), ("-0", True), ("0.0", True), ("1e5", True), ("1E+05", True), ("-1.5e-3", True)]
    + [("00", False), ("01", False), ("1.", False), (".1", False), ("+1", False), ("1e", False)]
    + [("-", False), ("1.e5", False), ("0x10", False), ("1_000", False), ("Infinity", False)],
)
def test_json_number_syntax(number: str, ok: bool) -> None:
    assert accepts(lark_parser("json", True), f"[{number}]") is ok


# -- SQL: the NAME terminal is generated from the keywords -------------------------------------


def non_keyword_name_pattern(keywords: list[str]) -> str:
    """Return [A-Za-z_][A-Za-z0-9_]* minus ``keywords`` (any case): a complemented trie."""
    first = set(string.ascii_letters + "_")
    rest = first | set(string.digits)
    trie: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in keywords:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def char_class(chars: set[str]) -> str:
        out, cps = [], sorted(map(ord, chars))
        i = 0
        while i < len(cps):
            j = i
            while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
                j += 1
            span = [chr(c) for c in range(cps[i], cps[j] + 1)]
            out.append(f"{span[0]}-{span[-1]}" if len(span) > 2 else "".join(span))
            i = j + 1
        return "[" + "".join(out) + "]"

    def suffixes(node: dict, alphabet: set[str], is_root: bool) -> str:  # type: ignore[type-arg]
        kids = sorted(c for c in node if c)
        parts = [f"[{c.upper()}{c}]" + suffixes(node[c], rest, False) for c in kids]
        other = alphabet - {v for c in kids for v in (c, c.upper())}
        parts.append(char_class(other) + "[A-Za-z0-9_]*")
        body = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
        if "" not in node and not is_root:  # a proper prefix of a keyword is a name
            body = (body if len(parts) > 1 else f"(?:{body})") + "?"
        return body

    return suffixes(trie, first, True)


def sql_keywords() -> list[str]:
    text = (GRAMMARS / "sql.lark").read_text()
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    return sorted(set(re.findall(r'"([a-z]+)"i', code)))


def test_sql_name_is_generated_from_the_keywords() -> None:
    text = (GRAMMARS / "sql.lark").read_text()
    found = re.search(r"^NAME: /(.*)/$", text, re.MULTILINE)
    assert found is not None
    expected = non_keyword_name_pattern(sql_keywords())
    assert found[1] == expected, f"regenerate sql.lark's NAME; it should be:\nNAME: /{expected}/"


def test_sql_name_excludes_exactly_the_keywords() -> None:
    keywords = sql_keywords()
    name = re.compile(non_keyword_name_pattern(keywords))
    assert {"select", "from", "where", "join", "left", "null", "distinct"} <= set(keywords)
    for word in keywords:
        for variant in (word, word.upper(), word.title()):
            assert not name.fullmatch(variant)
    rng = random.Random(0)
    for _ in range(20000):
        word = rng.choice(keywords + ["t", "_", "x1"])
        word = word[: rng.randint(1, len(word))] + "".join(
            rng.choice("aeinrst_0") for _ in range(rng.randint(0, 2))
        )
        word = "".join(c.upper() if rng.random() < 0.3 else c for c in word)
        assert bool(name.fullmatch(word)) == (word.lower() not in keywords), word


@pytest.mark.parametrize(
    "query",
    [
        'SELECT "select" FROM "from"',
        "SELECT `order`, `group` FROM t",
        "SELECT name, count FROM t",
        "SELECT selected, fromage, order_id, joined_at, nullable FROM t",
        "SeLeCt DiStInCt a FrOm t wHeRe b iS nOt NuLl",
    ],
)
def test_sql_keywords_and_names(query: str) -> None:
    assert accepts(lark_parser("sql", False), query)
    assert accepts(lark_parser("sql", True), query)


# -- CSV ----------------------------------------------------------------------------------------


def test_csv_quoted_field_keeps_commas_quotes_and_line_breaks() -> None:
    parser = lark_parser("csv", True)
    tree = parser.parse('h1,h2\r\n"a,b","say ""hi""\r\nbye"\r\n')
    fields = [str(v) for v in tree.scan_values(lambda v: v.type in ("TEXT", "QUOTED"))]
    assert fields == ["h1", "h2", '"a,b"', '"say ""hi""\r\nbye"']


# -- the compiled grammar agrees with Lark on the corpora ----------------------------------------


@pytest.mark.conformance
@pytest.mark.parametrize("name", NAMES)
def test_matcher_agrees_with_lark_on_the_corpus(name: str) -> None:
    """Feed every example byte by byte to constrain's own Matcher (byte vocabulary)."""
    compiler = pytest.importorskip("constrain.compiler")
    matcher_module = pytest.importorskip("constrain.matcher")
    from constrain.testing import byte_vocabulary

    grammar = builtin_grammar(name)
    compiled = compiler.Compiler(byte_vocabulary()).compile(grammar)
    for kind, positive in (("positive", True), ("negative", False)):
        for text in load_examples(CORPUS / name / f"{kind}.txt"):
            matcher = matcher_module.Matcher(compiled)
            data = list(text.encode("utf-8"))
            accepted = matcher.accept_tokens(data) == len(data) and matcher.is_accepting()
            # %ignore_at_end false: Lark's sentences that end in whitespace are not ours
            expected = positive and (grammar.ignore_at_end or text == text.rstrip(" \t\r\n"))
            assert accepted is expected, f"{name} {kind}: {text!r}"


@pytest.mark.slow
def test_sql_token_classes_equal_trie_walks_on_llama3(llama_vocab) -> None:  # type: ignore[no-untyped-def]
    """Llama 3's vocabulary under the SQL grammar: for every (lexer state, Earley kernel) met
    inside 10 corpus queries, the entry read from the state's token classes equals the trie
    walk's (within tokens, candidates, shared prefix lengths). SQL is where the classes are
    used: many parser configurations per lexer state."""
    import numpy as np

    from constrain import Compiler, Matcher
    from constrain.tables import MaskTables

    compiled = Compiler(llama_vocab).compile(builtin_grammar("sql"))
    keys: dict[tuple[int, bytes], np.ndarray] = {}
    m = Matcher(compiled)
    for text in load_examples(CORPUS / "sql" / "positive.txt")[:10]:
        m.reset()
        for byte in text.encode():
            assert m.accept_bytes(bytes([byte]))
            n = int(m._n)
            for p, s in zip(m._hyp[0, :n].tolist(), m._hyp[1, :n].tolist(), strict=True):
                kernel = m._kernel(p)
                keys.setdefault((s, kernel.tobytes()), kernel)
    lexer, parser, restart = compiled.kernel_lexer, compiled.parser, compiled.restart
    walked = MaskTables(llama_vocab, lexer, parser, max_bytes=1 << 30, restart=restart)
    walked.classifier.worth_classifying = lambda state: False  # type: ignore[method-assign]
    classified = MaskTables(llama_vocab, lexer, parser, max_bytes=1 << 30, restart=restart)
    classified.classifier.worth_classifying = lambda state: True  # type: ignore[method-assign]
    for key, kernel in sorted(keys.items()):
        want = walked.build(key[0], kernel)
        got = classified.build(key[0], kernel)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b), key
    assert classified.num_class_builds > 100
    assert classified.num_states_classified > 10
