"""Helpers of the XML argument-style tests: a structural tag of one style, string acceptance."""

from __future__ import annotations

from typing import Any

import constrain
from constrain.testing import byte_vocabulary


def style_spec(schema: Any, style: str = "qwen_xml", **extra: Any) -> dict[str, Any]:
    """Return a structural tag whose format is ``schema`` in an argument ``style``."""
    fmt = {"type": "json_schema", "json_schema": schema, "style": style, **extra}
    return {"type": "structural_tag", "format": fmt}


def accepts(grammar: constrain.Grammar, text: str) -> bool:
    """Return whether ``grammar`` accepts the whole of ``text`` (a byte-level matcher)."""
    matcher = constrain.Matcher(constrain.Compiler(byte_vocabulary()).compile(grammar))
    return matcher.accept_bytes(text) and matcher.is_accepting()


def check_language(spec: dict[str, Any], accepted: list[str], rejected: list[str]) -> None:
    """Assert that the grammar of a structural tag accepts ``accepted`` and no ``rejected``."""
    grammar = constrain.Grammar.from_structural_tag(spec)
    assert [t for t in accepted if not accepts(grammar, t)] == []
    assert [t for t in rejected if accepts(grammar, t)] == []
