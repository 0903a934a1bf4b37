"""Engine adapters for ``benchmarks/bench_engine.py``: constrain, llguidance and XGrammar.

Each adapter turns a :class:`GrammarSpec` into the engine's compiled grammar and gives the
benchmark loop two bound callables per matcher (fill the next-token bitmask, accept a token), so
the timed loop is the same code for every engine and adds the same Python overhead to each.

The peers are driven through their documented Python APIs, exactly as a serving stack would:

- llguidance: ``LLTokenizer`` from the HF tokenizer, ``LLMatcher(tokenizer, grammar)``,
  ``llguidance.torch.fill_next_token_bitmask``, ``consume_token``. An ``LLMatcher`` is both the
  compiled grammar and the matcher; one pristine matcher is kept per grammar and each text gets a
  ``deep_copy()`` of it (the analogue of "a new matcher from a compiled grammar").
- XGrammar: ``TokenizerInfo.from_huggingface``, a fresh ``GrammarCompiler(max_threads=1,
  cache_enabled=False)`` per grammar (so no compile is a cache hit), ``GrammarMatcher``,
  ``fill_next_token_bitmask``, ``accept_token``.
- constrain: ``Vocabulary.from_huggingface``, ``Compiler(vocab).compile(grammar)``, ``Matcher``.
- constrain-canonical: the same, with ``Matcher(compiled, canonical=...)``: masks and accepts also
  keep to the tokenizer's own (canonical) encodings. The ``CanonicalBpe`` relation is built once
  per process in ``prepare``, like the vocabulary; its rows are computed at first use and cached,
  so they fall into the measured masks.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from common import MissingPeerError, import_peer

__all__ = ["ENGINES", "Engine", "GrammarSpec", "MatcherHandle", "MissingPeerError"]

GrammarKind = Literal["regex", "json", "lark", "json_schema", "structural_tag"]


@dataclass(frozen=True)
class GrammarSpec:
    """One grammar of a workload, in a form every engine can compile.

    ``source`` is the regex (``regex``), the Lark text (``lark``), the schema object
    (``json_schema``), XGrammar's structural-tag object (``structural_tag``) or ``None``
    (``json``: the engine's own "any JSON" grammar).
    """

    kind: GrammarKind
    name: str
    source: str | dict[str, Any] | bool | None


@dataclass
class MatcherHandle:
    """The three operations the benchmark loop needs from a fresh matcher."""

    fill: Callable[[], object]
    accept: Callable[[int], bool]
    is_accepting: Callable[[], bool]


class UnavailableError(RuntimeError):
    """The engine lacks the API this grammar kind needs (recorded as "not available")."""


class Engine:
    """Common interface; subclasses implement the engine-specific calls."""

    name: str = ""

    def __init__(self) -> None:
        self.vocab_size = 0
        self.eos_token_id = -1
        self.version = "unknown"

    def prepare(self, tokenizer: Any) -> None:
        """Build the engine's vocabulary/tokenizer data once (timed apart from compiles)."""
        raise NotImplementedError

    def new_compiler(self) -> Any:
        """A fresh compiler object, created outside the compile timer (``None`` if unneeded)."""
        return None

    def compile(self, compiler: Any, spec: GrammarSpec) -> Any:
        """Compile one grammar with ``compiler``; this is what ``compile_ms`` times."""
        raise NotImplementedError

    def allocate_bitmask(self) -> torch.Tensor:
        """A ``(1, ceil(V/32))`` int32 bitmask from the engine's own allocator."""
        raise NotImplementedError

    def new_matcher(self, compiled: Any, bitmask: torch.Tensor) -> MatcherHandle:
        """A matcher in its initial state for ``compiled``, writing masks into ``bitmask[0]``."""
        raise NotImplementedError

    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor) -> None:
        """Mask ``logits`` in place with the engine's own CPU kernel."""
        raise NotImplementedError


def peer_lark(text: str) -> str:
    """A Lark text for the peers: without constrain's ``%lexer basic`` line (greedy lexing,
    which llguidance's lexer does anyway; XGrammar has no lexer) and ``%ignore_at_end``."""
    from constrain.frontends.lark import without_option_lines

    return without_option_lines(text)


def _schema_text(source: str | dict[str, Any] | bool | None) -> str:
    if isinstance(source, str):
        return source
    return json.dumps(source)


class LLGuidanceEngine(Engine):
    """llguidance (Rust, lazy derivative lexer + Earley parser)."""

    name = "llguidance"

    def __init__(self) -> None:
        super().__init__()
        llguidance = import_peer("llguidance")
        import_peer("llguidance.hf")
        self._llg = llguidance
        self._fill = import_peer("llguidance.torch").fill_next_token_bitmask
        self.version = importlib.metadata.version("llguidance")
        self._tokenizer: Any = None

    def prepare(self, tokenizer: Any) -> None:
        import llguidance.hf

        self._tokenizer = llguidance.hf.from_tokenizer(tokenizer)
        self.vocab_size = int(self._tokenizer.vocab_size)
        self.eos_token_id = int(self._tokenizer.eos_token)

    def grammar_string(self, spec: GrammarSpec) -> str:
        """The llguidance grammar definition for ``spec``."""
        matcher_cls = self._llg.LLMatcher
        if spec.kind == "regex":
            assert isinstance(spec.source, str)
            return str(matcher_cls.grammar_from_regex(spec.source))
        if spec.kind == "json":
            # llguidance's own "any JSON": the %json embed with an empty schema.
            return str(matcher_cls.grammar_from_lark("start: %json {}"))
        if spec.kind == "lark":
            assert isinstance(spec.source, str)
            return str(matcher_cls.grammar_from_lark(peer_lark(spec.source)))
        if spec.kind == "structural_tag":
            raise UnavailableError("llguidance reads no XGrammar structural tag")
        # flexible whitespace, as every engine here: the texts are json.dumps output
        options = {"whitespace_flexible": True}
        return str(
            matcher_cls.grammar_from_json_schema(_schema_text(spec.source), defaults=options)
        )

    def compile(self, compiler: Any, spec: GrammarSpec) -> Any:
        # LLMatcher never raises on grammar errors: it enters an error state instead.
        matcher = self._llg.LLMatcher(self._tokenizer, self.grammar_string(spec), log_level=0)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        return matcher

    def allocate_bitmask(self) -> torch.Tensor:
        import llguidance.torch

        return llguidance.torch.allocate_token_bitmask(1, self.vocab_size)

    def new_matcher(self, compiled: Any, bitmask: torch.Tensor) -> MatcherHandle:
        matcher = compiled.deep_copy()
        return MatcherHandle(
            fill=functools.partial(self._fill, matcher, bitmask, 0),
            accept=matcher.consume_token,
            is_accepting=matcher.is_accepting,
        )


class XGrammarEngine(Engine):
    """XGrammar (C++, Earley parser + adaptive token-mask cache computed at compile time)."""

    name = "xgrammar"

    def __init__(self) -> None:
        super().__init__()
        self._xgr = import_peer("xgrammar")
        self.version = importlib.metadata.version("xgrammar")
        self._info: Any = None

    def prepare(self, tokenizer: Any) -> None:
        self._info = self._xgr.TokenizerInfo.from_huggingface(tokenizer)
        self.vocab_size = int(self._info.vocab_size)
        self.eos_token_id = int(self._info.stop_token_ids[0])

    def new_compiler(self) -> Any:
        # A fresh, cache-less compiler per grammar: no compile can be a cache hit.
        return self._xgr.GrammarCompiler(self._info, max_threads=1, cache_enabled=False)

    def compile(self, compiler: Any, spec: GrammarSpec) -> Any:
        if spec.kind == "regex":
            return compiler.compile_regex(spec.source)
        if spec.kind == "json":
            return compiler.compile_builtin_json_grammar()
        if spec.kind == "lark":
            assert isinstance(spec.source, str)
            return compiler.compile_lark(peer_lark(spec.source))
        if spec.kind == "structural_tag":
            return compiler.compile_structural_tag(spec.source)
        # strict_mode=False: follow the JSON Schema spec (extra properties/items allowed unless
        # forbidden), like llguidance; XGrammar's default strict_mode=True would reject valid
        # MaskBench instances. any_whitespace=True (default) accepts json.dumps separators.
        return compiler.compile_json_schema(
            _schema_text(spec.source), any_whitespace=True, strict_mode=False
        )

    def allocate_bitmask(self) -> torch.Tensor:
        return self._xgr.allocate_token_bitmask(1, self.vocab_size)

    def new_matcher(self, compiled: Any, bitmask: torch.Tensor) -> MatcherHandle:
        matcher = self._xgr.GrammarMatcher(compiled)
        return MatcherHandle(
            fill=functools.partial(matcher.fill_next_token_bitmask, bitmask, 0),
            accept=matcher.accept_token,
            is_accepting=matcher.is_completed,
        )

    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor) -> None:
        self._xgr.apply_token_bitmask_inplace(logits, bitmask)


_MISSING_API = (ImportError, AttributeError, NotImplementedError)


class ConstrainEngine(Engine):
    """constrain, through its public API only (``constrain.Vocabulary``, ``Compiler``, ...)."""

    name = "constrain"

    def __init__(self) -> None:
        super().__init__()
        self._cst: Any = None
        self._vocab: Any = None

    def prepare(self, tokenizer: Any) -> None:
        import constrain

        self._cst = constrain
        self.version = str(getattr(constrain, "__version__", "unknown"))
        # the trie and string slices are per-tokenizer work (llguidance's from_tokenizer does
        # its own here too), not a first mask's
        self._vocab = constrain.Vocabulary.from_huggingface(tokenizer).prepare()
        # what a server does once at start: load every kernel from numba's cache (about 7 s),
        # so that no request, e.g. the first one with a lazily built lexer, loads code
        from constrain.warmup import warm_up

        warm_up(self._vocab)
        self.vocab_size = int(self._vocab.size)
        self.eos_token_id = int(tokenizer.eos_token_id)

    def new_compiler(self) -> Any:
        # A fresh Compiler per grammar, like XGrammar's, so no compile can be a cache hit.
        return self._cst.Compiler(self._vocab)

    def grammar(self, spec: GrammarSpec) -> Any:
        """The ``constrain.Grammar`` for ``spec``."""
        grammar_cls = self._cst.Grammar
        if spec.kind == "regex":
            return grammar_cls.from_regex(spec.source)
        if spec.kind == "json":
            return grammar_cls.builtin("json")
        if spec.kind == "lark":
            return grammar_cls.from_lark(spec.source)
        if spec.kind == "structural_tag":
            return grammar_cls.from_structural_tag(spec.source)
        try:
            from_json_schema = grammar_cls.from_json_schema
        except AttributeError as exc:
            raise UnavailableError(f"constrain.Grammar.from_json_schema: {exc}") from exc
        # flexible whitespace, as the peers here (constrain's default layout is compact)
        return from_json_schema(spec.source, whitespace="flexible")

    def compile(self, compiler: Any, spec: GrammarSpec) -> Any:
        # A missing JSON Schema front end is "not available", not a failure of the engine.
        if spec.kind == "json_schema":
            try:
                grammar = self.grammar(spec)
            except _MISSING_API as exc:
                raise UnavailableError(f"{type(exc).__name__}: {exc}") from exc
        else:
            grammar = self.grammar(spec)
        return compiler.compile(grammar)

    def allocate_bitmask(self) -> torch.Tensor:
        bitmask: torch.Tensor = self._cst.allocate_token_bitmask(1, self.vocab_size)
        return bitmask

    def matcher(self, compiled: Any) -> Any:
        """A new ``constrain.Matcher`` of ``compiled``."""
        return self._cst.Matcher(compiled)

    def new_matcher(self, compiled: Any, bitmask: torch.Tensor) -> MatcherHandle:
        matcher = self.matcher(compiled)
        return MatcherHandle(
            fill=functools.partial(matcher.fill_next_token_bitmask, bitmask, index=0),
            accept=matcher.accept_token,
            is_accepting=matcher.is_accepting,
        )

    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor) -> None:
        self._cst.apply_token_bitmask_inplace(logits, bitmask)


class ConstrainCanonicalEngine(ConstrainEngine):
    """constrain with canonical tokenization (``Matcher(compiled, canonical=CanonicalBpe)``)."""

    name = "constrain-canonical"

    def __init__(self) -> None:
        super().__init__()
        self.canonical: Any = None

    def prepare(self, tokenizer: Any) -> None:
        from constrain.vocab.canonical import CanonicalBpe

        super().prepare(tokenizer)
        # per tokenizer, like the vocabulary: built once per process, its rows cached across
        # grammars and texts (first visits are measured in the masks that make them)
        self.canonical = CanonicalBpe.from_huggingface(tokenizer, self._vocab)

    def matcher(self, compiled: Any) -> Any:
        return self._cst.Matcher(compiled, canonical=self.canonical)


ENGINES: dict[str, type[Engine]] = {
    "constrain": ConstrainEngine,
    "constrain-canonical": ConstrainCanonicalEngine,
    "llguidance": LLGuidanceEngine,
    "xgrammar": XGrammarEngine,
}
