r"""constrain: language-model output guaranteed to follow a regex, a JSON Schema or a grammar.

Pipeline: front ends (regex, Lark, JSON Schema, pydantic) -> :class:`Grammar` IR -> byte-level
automata -> lazily computed token tables -> :class:`Matcher` -> bitmask kernels.

>>> import constrain
>>> vocab = constrain.Vocabulary.from_huggingface(tokenizer)  # doctest: +SKIP
>>> grammar = constrain.Grammar.from_regex(r"\d{3}")
>>> compiled = constrain.Compiler(vocab).compile(grammar)  # doctest: +SKIP
>>> m = constrain.Matcher(compiled)  # doctest: +SKIP

Heavy modules (numba kernels, torch) are imported on first use, so ``import constrain`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from constrain._version import __version__
from constrain.errors import (
    CompileLimitError,
    ConstrainError,
    GrammarError,
    IncompleteOutputError,
    JsonSchemaError,
    LarkGrammarError,
    MatcherStateError,
    OutputValidationError,
    RegexError,
    VocabularyError,
)
from constrain.ir import Grammar

if TYPE_CHECKING:
    from constrain.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
    from constrain.compiler import CompiledGrammar, CompileLimits, Compiler
    from constrain.generation import GenerationResult, generate, stream
    from constrain.integrations.transformers import Model, load_model
    from constrain.matcher import Matcher, fill_next_token_bitmasks
    from constrain.vocab.vocabulary import Vocabulary

__all__ = [
    "CompileLimitError",
    "CompileLimits",
    "CompiledGrammar",
    "Compiler",
    "ConstrainError",
    "Grammar",
    "GenerationResult",
    "GrammarError",
    "IncompleteOutputError",
    "JsonSchemaError",
    "LarkGrammarError",
    "Matcher",
    "MatcherStateError",
    "Model",
    "OutputValidationError",
    "RegexError",
    "Vocabulary",
    "VocabularyError",
    "__version__",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmasks",
    "generate",
    "load_model",
    "stream",
]

_LAZY = {
    "Vocabulary": "constrain.vocab.vocabulary",
    "Compiler": "constrain.compiler",
    "CompiledGrammar": "constrain.compiler",
    "CompileLimits": "constrain.compiler",
    "Matcher": "constrain.matcher",
    "fill_next_token_bitmasks": "constrain.matcher",
    "allocate_token_bitmask": "constrain.bitmask",
    "apply_token_bitmask_inplace": "constrain.bitmask",
    "generate": "constrain.generation",
    "stream": "constrain.generation",
    "GenerationResult": "constrain.generation",
    "load_model": "constrain.integrations.transformers",
    "Model": "constrain.integrations.transformers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'constrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
