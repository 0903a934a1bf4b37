"""Request specs of the vLLM integration, without vLLM: spec -> grammar, admission checks."""

from __future__ import annotations

import json

import pytest

import constrain
from constrain.integrations.vllm import SPEC_KEY, _check_spec, request_args, spec_grammar
from constrain.testing import byte_vocabulary


def _spec(**kwargs: object) -> str:
    return request_args(**kwargs)[SPEC_KEY]  # type: ignore[arg-type]


def test_choices_spec_matches_exactly_one_choice() -> None:
    grammar = spec_grammar(_spec(choices=["yes", "no", "yes"]))
    compiled = constrain.Compiler(byte_vocabulary()).compile(grammar)
    for text, ok in ((b"yes", True), (b"no", True), (b"ye", False), (b"yesno", False)):
        m = constrain.Matcher(compiled)
        assert (m.accept_bytes(text) and m.is_accepting()) is ok, text


@pytest.mark.parametrize("choices", [[], ["a", 1], "ab"])
def test_bad_choices_are_a_value_error(choices: object) -> None:
    spec = json.dumps({"choices": choices}, separators=(",", ":"))
    with pytest.raises(ValueError, match="choices must be a non-empty list of strings"):
        spec_grammar(spec)


def test_admission_check_caches_successes_only() -> None:
    good = _spec(regex="[a-c]{2}")
    _check_spec(good)
    hits = _check_spec.cache_info().hits
    _check_spec(good)
    assert _check_spec.cache_info().hits == hits + 1
    bad = _spec(json_schema={"type": "string", "pattern": "(?=a)b"})  # lookahead: refused
    for _ in range(2):  # raises every time: a refusal is never cached as a success
        with pytest.raises(constrain.JsonSchemaError):
            _check_spec(bad)


def test_a_grammar_is_lark_or_ebnf() -> None:
    vocab = byte_vocabulary()
    ebnf = spec_grammar(_spec(grammar='root ::= "a" digits\ndigits ::= [0-9]{1,2}'))
    lark = spec_grammar(_spec(grammar='start: "a" /[0-9]{1,2}/'))
    for grammar in (ebnf, lark):
        compiled = constrain.Compiler(vocab).compile(grammar)
        for text, ok in ((b"a1", True), (b"a12", True), (b"a123", False), (b"b1", False)):
            m = constrain.Matcher(compiled)
            assert (m.accept_bytes(text) and m.is_accepting()) is ok, text
