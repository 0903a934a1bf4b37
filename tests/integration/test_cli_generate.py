"""``generate`` and ``demo`` on the real default model (SmolLM2-135M-Instruct).

``main([...])`` runs in this process, so every call shares the model that
``constrain.generation.default_model()`` loads once. Outputs are short (bounded schemas, short
regexes, choices) to keep the module under a minute on two CPU cores.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jsonschema
import pytest

from constrain.cli import main
from constrain.generation import default_model
from constrain.integrations.transformers import ModelNotFoundError

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PERSON = ROOT / "grammars" / "person.schema.json"
PHONE = r"[0-9]{3}-[0-9]{4}"  # not \d: Python's \d also matches other scripts' digits


@pytest.fixture(scope="module", autouse=True)
def _model() -> None:
    try:
        default_model()  # loaded once; every main() call below reuses it
    except ModelNotFoundError as err:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(err))
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def person_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(PERSON.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def test_generate_schema_json(
    person_validator: jsonschema.Draft202012Validator, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt = "A JSON profile of a teacher from Porto, Portugal, who knows Python."
    assert main(["generate", prompt, "--schema", str(PERSON), "--json", "--max-tokens", "160"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    info = json.loads(lines[0])
    assert set(info) == {
        "value",
        "text",
        "finish_reason",
        "prompt_tokens",
        "output_tokens",
        "seconds",
        "compile_seconds",
        "tokens_per_second",
    }
    person_validator.validate(info["value"])
    assert json.loads(info["text"]) == info["value"]
    assert info["finish_reason"] == "stop"
    assert info["prompt_tokens"] > 0
    assert 0 < info["output_tokens"] <= 160
    assert info["seconds"] > 0
    assert info["compile_seconds"] >= 0


def test_generate_regex_prints_the_string(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "The office phone number is", "--regex", PHONE]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n")
    assert re.fullmatch(PHONE, out[:-1])


def test_generate_stream_prints_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "generate",
                "Call me at",
                "--regex",
                PHONE,
                "--stream",
                "--temperature",
                "0.7",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert re.fullmatch(PHONE + r"\n", out)


def test_generate_choices(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "Is the sky blue on a clear day? Answer yes or no."]
    assert main([*argv, "--choices", "yes", "no"]) == 0
    assert capsys.readouterr().out in ("yes\n", "no\n")


def test_generate_pydantic_file_prints_model_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cli_gen_models.py"
    path.write_text(
        "from typing import Literal\n"
        "from pydantic import BaseModel, Field\n\n"
        "class Capital(BaseModel):\n"
        "    city: str = Field(min_length=1, max_length=15)\n"
        "    country: Literal['France', 'Italy', 'Spain']\n",
        encoding="utf-8",
    )
    prompt = "What is the capital of Italy? Answer in JSON."
    assert main(["generate", prompt, "--pydantic", f"{path}:Capital"]) == 0
    value = json.loads(capsys.readouterr().out)
    assert set(value) == {"city", "country"}
    assert value["country"] in ("France", "Italy", "Spain")
    assert 1 <= len(value["city"]) <= 15


def test_generate_batch_file_prints_one_json_line_per_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Is water wet?\n\nIs fire cold?\nIs two even?\n", encoding="utf-8")
    argv = ["generate", "--batch-file", str(prompts), "--batch-size", "2", "--json"]
    assert main([*argv, "--choices", "yes", "no"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3  # one per prompt; the blank line is skipped
    rows = [json.loads(line) for line in lines]
    assert all(r["value"] in ("yes", "no") and r["text"] == r["value"] for r in rows)
    assert all(r["finish_reason"] == "stop" and r["output_tokens"] >= 1 for r in rows)


def test_generate_incomplete_output_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "Write a long JSON document.", "--grammar", "json", "--max-tokens", "3"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: IncompleteOutputError: max_tokens=3")
    assert "partial output: " in captured.err


def test_demo_prints_valid_json(
    person_validator: jsonschema.Draft202012Validator, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo"]) == 0
    captured = capsys.readouterr()
    value = json.loads(captured.out)
    person_validator.validate(value)
    assert captured.out.startswith("{\n  ")  # pretty-printed
    summary = captured.err.splitlines()[-1]
    assert re.fullmatch(
        r"\d+ tokens in [\d.]+ s \([\d.]+ tokens/s\) \| compile \d+ ms \| model load [\d.]+ s"
        r" \| valid against person\.schema\.json",
        summary,
    )


def test_generate_speculative_prints_the_same_string(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "The office phone number is", "--regex", PHONE]
    assert main(argv) == 0
    plain = capsys.readouterr().out
    assert main([*argv, "--speculative"]) == 0
    assert capsys.readouterr().out == plain
    assert main([*argv, "--speculative", "grammar,lookup"]) == 0
    assert capsys.readouterr().out == plain
