"""Command line: ``python -m constrain <command>``.

Commands
--------
``demo``
    The engine end to end on the Llama 3.2 tokenizer (128k tokens): compile a regex, the JSON
    grammar and the SQL grammar, drive them with real texts token by token (fill the mask, check
    the token is allowed, accept it), and print timings and the jump-forward bytes.
``check``
    Whether a text is in the language of a regex or grammar; on rejection, where and why.
``mask``
    The tokens a grammar allows after a prefix.

(No ``constrain`` console script is installed: the name belongs to another PyPI project.)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from constrain.errors import ConstrainError, caret_context
from constrain.ir import Grammar

__all__ = ["main"]


def _grammar(args: argparse.Namespace) -> Grammar:
    if args.regex is not None:
        return Grammar.from_regex(args.regex)
    name = args.grammar
    path = Path(name)
    if path.suffix == ".lark" and path.exists():
        return Grammar.from_lark_file(path)
    return Grammar.builtin(name)


def _vocabulary(name: str):  # type: ignore[no-untyped-def]
    from constrain import testing
    from constrain.vocab import Vocabulary

    if name == "llama3":
        return testing.llama3_vocabulary()
    if name == "qwen":
        return testing.qwen_vocabulary()
    if name == "byte":
        return testing.byte_vocabulary()
    from tokenizers import Tokenizer

    return Vocabulary.from_huggingface(Tokenizer.from_file(name))


def _cmd_check(args: argparse.Namespace) -> int:
    from constrain.compiler import Compiler
    from constrain.matcher import Matcher
    from constrain.testing import byte_vocabulary

    text = sys.stdin.read() if args.text == "-" else args.text
    compiled = Compiler(byte_vocabulary()).compile(_grammar(args))
    m = Matcher(compiled)
    data = text.encode()
    for k, b in enumerate(data):
        if not m.accept_token(b):
            offset = len(data[:k].decode(errors="ignore"))
            print(f"rejected at offset {offset}:\n{caret_context(text, offset)}")
            return 1
    if not m.is_accepting():
        print(f"incomplete: the text is a valid prefix but not a complete sentence\n"
              f"{caret_context(text, len(text))}")  # fmt: skip
        return 1
    print("accepted")
    return 0


def _cmd_mask(args: argparse.Namespace) -> int:
    from constrain.compiler import Compiler
    from constrain.matcher import Matcher

    vocab = _vocabulary(args.tokenizer)
    m = Matcher(Compiler(vocab).compile(_grammar(args)))
    if not m.accept_bytes(args.prefix.encode()):
        print("the prefix is not a valid prefix of the grammar")
        return 1
    ids = m.allowed_token_ids()
    print(f"{len(ids)} of {vocab.size} tokens allowed; forced next bytes: {m.forced_bytes()!r}")
    for t in ids[: args.show]:
        print(f"  {int(t):>7}  {vocab.token_bytes_of(int(t))!r}")
    return 0


_DEMO_REGEX = r"\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}"
_DEMO_TEXTS = {
    "regex (US phone)": ["(555) 123-4567", "555.123.4567", "5551234567"],
    "json": [
        '{"name": "Ada Lovelace", "born": 1815, "languages": ["en", "fr"], "notes": null}',
        '[{"id": 1, "ok": true, "score": 9.5e-1}, {"id": 2, "ok": false, "tags": []}]',
    ],
    "sql": [
        "SELECT c.name, COUNT(*) AS n FROM customers AS c JOIN orders AS o ON o.cid = c.id "
        "WHERE o.total > 100 GROUP BY c.name HAVING COUNT(*) > 2 ORDER BY n DESC LIMIT 10",
    ],
}


def _cmd_demo(args: argparse.Namespace) -> int:
    from tokenizers import Tokenizer

    from constrain import testing
    from constrain.bitmask import allocate_token_bitmask
    from constrain.compiler import Compiler
    from constrain.matcher import Matcher

    t0 = time.perf_counter()
    vocab = testing.llama3_vocabulary()
    tok = Tokenizer.from_file(str(testing.llama3_tokenizer_path()))
    print(f"Llama 3.2 vocabulary: {vocab.size} tokens ({time.perf_counter() - t0:.2f} s)")
    compiler = Compiler(vocab)
    bitmask = allocate_token_bitmask(1, vocab.size)
    grammars = {
        "regex (US phone)": Grammar.from_regex(_DEMO_REGEX),
        "json": Grammar.builtin("json"),
        "sql": Grammar.builtin("sql"),
    }
    for label, grammar in grammars.items():
        t0 = time.perf_counter()
        compiled = compiler.compile(grammar)
        compile_ms = (time.perf_counter() - t0) * 1e3
        times = []
        for text in _DEMO_TEXTS[label]:
            m = Matcher(compiled)
            for token in tok.encode(text, add_special_tokens=False).ids:
                t1 = time.perf_counter()
                m.fill_next_token_bitmask(bitmask)
                allowed = bool(int(bitmask[0, token >> 5]) >> (token & 31) & 1)
                accepted = m.accept_token(token)
                times.append(time.perf_counter() - t1)
                if not (allowed and accepted):
                    print(f"  BUG: {vocab.token_bytes_of(token)!r} rejected in {text!r}")
                    return 1
            if not m.accept_token(int(vocab.eos_ids[0])):
                print(f"  BUG: EOS rejected after {text!r}")
                return 1
        us = np.array(times) * 1e6
        print(
            f"{label:>17}: compile {compile_ms:7.1f} ms | {len(us):4d} tokens | per token "
            f"mean {us.mean():7.1f} us, p50 {np.median(us):6.1f} us (first mask included)"
        )
    m = Matcher(compiler.compile(Grammar.from_lark(
        'start: "{\\"name\\": " STRING ", \\"age\\": " INT "}"\n'
        "%import common.ESCAPED_STRING -> STRING\n%import common.INT"
    )))  # fmt: skip
    print(f"jump-forward at the start of a record grammar: {m.forced_bytes()!r}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m constrain", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the engine on real texts with the Llama 3.2 tokenizer")
    for name, helptext in (("check", "is TEXT in the language?"), ("mask", "allowed tokens")):
        p = sub.add_parser(name, help=helptext)
        src = p.add_mutually_exclusive_group(required=True)
        src.add_argument("--regex", help="a Python regular expression (full match)")
        src.add_argument("--grammar", help="a shipped grammar name (json, sql, ...) or .lark file")
        if name == "check":
            p.add_argument("text", help="the text, or - for standard input")
        else:
            p.add_argument("--prefix", default="", help="text generated so far")
            p.add_argument("--tokenizer", default="llama3", help="llama3, qwen, byte or a path")
            p.add_argument("--show", type=int, default=20, help="how many tokens to list")
    args = parser.parse_args(argv)
    commands = {"demo": _cmd_demo, "check": _cmd_check, "mask": _cmd_mask}
    try:
        return commands[args.command](args)
    except ConstrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
