"""The command line without a model: ``check``, ``mask``, argument errors, ``--pydantic``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from constrain import cli
from constrain.cli import CliError, main, resolve_object

ROOT = Path(__file__).resolve().parents[2]
PERSON = ROOT / "grammars" / "person.schema.json"

UNSUPPORTED = {
    "type": "object",
    "properties": {
        "host": {"type": "string", "format": "no-such-format"},
        "node": {"$dynamicRef": "#node"},
        "ok": {"type": "boolean"},
    },
}


def _write(path: Path, data: object) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


# -- check: statistics -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        ["--grammar", "sql"],
        ["--grammar", str(ROOT / "grammars" / "sql.lark")],
        ["--regex", r"\d{3}-\d{4}"],
        ["--schema", str(PERSON)],
    ],
    ids=["builtin", "lark-file", "regex", "schema"],
)
def test_check_prints_stats(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", *flags]) == 0
    out = capsys.readouterr().out
    assert f"{flags[0][2:]} {flags[1]}: compiles" in out
    for key in ("compile", "rules", "Earley items", "terminals", "lexer states", "static tables"):
        assert f"  {key} " in out
    assert "vocabulary     257 tokens" in out


def test_check_stats_figures_match_the_compiled_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    from constrain import Compiler, Grammar
    from constrain.testing import byte_vocabulary

    compiled = Compiler(byte_vocabulary()).compile(Grammar.builtin("json"))
    assert main(["check", "--grammar", "json"]) == 0
    out = capsys.readouterr().out
    # %ignore_at_end false: whitespace is a prefix of each terminal, nothing is ignored
    assert not compiled.grammar.ignore_at_end and not compiled.grammar.ignore
    assert f"terminals      {compiled.parser.num_terminals} (0 ignored)" in out
    assert f"lexer states   {compiled.lexer.trans.shape[0]} x " in out
    assert f"Earley items   {compiled.parser.num_items}\n" in out


def test_check_schema_with_unsupported_keywords_lists_every_pointer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _write(tmp_path / "s.json", UNSUPPORTED)
    assert main(["check", "--schema", schema]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "2 problem(s)" in captured.err
    assert "  #/properties/host/format: " in captured.err
    assert "  #/properties/node/$dynamicRef: " in captured.err
    assert "--lenient" in captured.err


def test_check_schema_lenient_compiles_and_lists_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _write(tmp_path / "s.json", UNSUPPORTED)
    assert main(["check", "--schema", schema, "--lenient"]) == 0
    out = capsys.readouterr().out
    assert ": compiles" in out
    assert "2 keyword(s) not enforced (--lenient):" in out
    assert "  #/properties/host/format: " in out
    assert "  #/properties/node/$dynamicRef: " in out


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "#/properties/a/$ref"),
        ({"properties": {"a": {"type": "string", "pattern": "(?=x)a"}}}, "#/properties/a/pattern"),
    ],
    ids=["unresolvable-ref", "lookahead-pattern"],
)
def test_check_schema_error_prints_pointer_and_exits_1(
    schema: object, pointer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "s.json", schema)
    for extra in ([], ["--lenient"]):  # --lenient does not hide errors
        assert main(["check", "--schema", path, *extra]) == 1
        err = capsys.readouterr().err
        assert "1 problem(s)" in err
        assert f"  {pointer}: " in err
        assert f"(at {pointer})" not in err  # the pointer is not repeated
        assert "pass --lenient" not in err  # it would not help


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--grammar", "no_such_grammar"], "no_such_grammar"),
        (["--regex", "a(?<=b)"], "lookbehind"),
        (["--grammar", "missing.lark"], "missing.lark"),
        (["--schema", "missing.json"], "no such file"),
    ],
)
def test_check_invalid_constraint_exits_1(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert message in err


def test_check_bad_lark_grammar_reports_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.lark"
    path.write_text('start: "a" b\n', encoding="utf-8")
    assert main(["check", "--grammar", str(path)]) == 1
    err = capsys.readouterr().err
    assert "LarkGrammarError" in err
    assert "line 1" in err


def test_check_unknown_tokenizer_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--regex", "a", "--tokenizer", "nope"]) == 1
    assert "--tokenizer 'nope'" in capsys.readouterr().err


# -- check: texts ------------------------------------------------------------------------------


def test_check_text_accepted_and_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--regex", r"\d{3}-\d{4}", "555-1234"]) == 0
    assert capsys.readouterr().out == "accepted\n"
    assert main(["check", "--regex", r"\d{3}-\d{4}", "555-12x4"]) == 1
    assert capsys.readouterr().out == "rejected at offset 6:\n555-12x4\n      ^\n"
    assert main(["check", "--regex", r"\d{3}-\d{4}", "555-12"]) == 1
    assert capsys.readouterr().out.startswith("incomplete: ")


def test_check_text_with_a_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--grammar", "sql", "SELECT a FROM t WHERE b > 1"]) == 0
    assert capsys.readouterr().out == "accepted\n"
    assert main(["check", "--grammar", "sql", "SELECT a,, b FROM t"]) == 1
    assert capsys.readouterr().out == "rejected at offset 9:\nSELECT a,, b FROM t\n         ^\n"


def test_check_text_with_a_schema(capsys: pytest.CaptureFixture[str]) -> None:
    good = {
        "name": "Ana",
        "age": 31,
        "role": "engineer",
        "address": {"city": "Lisbon", "country": "Portugal"},
        "skills": ["Rust"],
    }
    text = json.dumps(good)  # the default layout: json.dumps's separators
    assert main(["check", "--schema", str(PERSON), text]) == 0
    assert capsys.readouterr().out == "accepted\n"
    bad = text.replace('"engineer"', '"pilot"')
    assert main(["check", "--schema", str(PERSON), bad]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"rejected at offset {bad.index('pilot')}:")
    too_old = text.replace("31", "121")
    assert main(["check", "--schema", str(PERSON), too_old]) == 1
    assert capsys.readouterr().out.startswith("rejected at offset ")
    # whitespace: json.dumps' layout by default (as generate() writes), --whitespace compact
    spaced = json.dumps(good)
    assert main(["check", "--schema", str(PERSON), spaced]) == 0
    assert capsys.readouterr().out == "accepted\n"
    assert main(["check", "--schema", str(PERSON), "--whitespace", "compact", spaced]) == 1
    capsys.readouterr()
    assert main(["check", "--schema", str(PERSON), "--whitespace", "flexible", spaced]) == 0
    assert capsys.readouterr().out == "accepted\n"


def test_check_text_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"a": [1, 2.5, null]}'))
    assert main(["check", "--grammar", "json", "-"]) == 0
    assert capsys.readouterr().out == "accepted\n"


# -- check --pydantic and the resolver ---------------------------------------------------------

MODELS_PY = """
from pydantic import BaseModel, Field


class City(BaseModel):
    name: str = Field(max_length=20, alias="cityName")
    population: int = Field(ge=0)


class Outer:
    class Inner(BaseModel):
        flag: bool


NOT_A_MODEL = 3
"""


@pytest.fixture
def models_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    name = f"cli_models_{tmp_path.name.replace('-', '_')}"
    path = tmp_path / f"{name}.py"
    path.write_text(MODELS_PY, encoding="utf-8")
    yield path
    sys.modules.pop(name, None)
    for entry in (str(tmp_path), str(tmp_path.resolve())):
        while entry in sys.path:
            sys.path.remove(entry)


def test_resolve_object_from_a_file_path(models_file: Path) -> None:
    city = resolve_object(f"{models_file}:City")
    assert city.__name__ == "City"
    assert city.model_validate({"cityName": "Porto", "population": 3}).name == "Porto"
    assert resolve_object(f"{models_file}:Outer.Inner").__name__ == "Inner"
    assert resolve_object(f"{models_file}:City") is city  # the module is not imported twice


def test_resolve_object_from_a_module_in_the_current_directory(
    models_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(models_file.parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    city = resolve_object(f"{models_file.stem}:City")
    assert city.__name__ == "City"
    assert str(models_file.parent.resolve()) in [str(Path(p).resolve()) for p in sys.path]


def test_resolve_object_from_an_installed_module() -> None:
    from constrain.ir import Grammar

    assert resolve_object("constrain.ir:Grammar") is Grammar


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("City", "expected MODULE:NAME"),
        ("module:", "expected MODULE:NAME"),
        ("no_such_module_xyz:City", "cannot import 'no_such_module_xyz'"),
        ("missing/file.py:City", "no such file"),
        ("{models}:Nope", "has no attribute 'Nope'"),
        ("{models}:Outer.Nope", "has no attribute 'Outer.Nope'"),
    ],
)
def test_resolve_object_errors(spec: str, message: str, models_file: Path) -> None:
    with pytest.raises(CliError, match=message):
        resolve_object(spec.format(models=models_file))


def test_check_pydantic(models_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--pydantic", f"{models_file}:City"]) == 0
    assert ": compiles" in capsys.readouterr().out
    text = '{"cityName": "Porto", "population": 230000}'
    assert main(["check", "--pydantic", f"{models_file}:City", text]) == 0
    assert capsys.readouterr().out == "accepted\n"
    assert main(["check", "--pydantic", f"{models_file}:City", text.replace("230000", "-1")]) == 1
    capsys.readouterr()
    assert main(["check", "--pydantic", f"{models_file}:Nope"]) == 1
    assert "has no attribute 'Nope'" in capsys.readouterr().err


def test_format_value_prints_pydantic_json_by_alias(models_file: Path) -> None:
    city = resolve_object(f"{models_file}:City")
    value = city.model_validate({"cityName": "Porto", "population": 3})
    assert json.loads(cli._format_value(value, "pydantic")) == {
        "cityName": "Porto",
        "population": 3,
    }
    assert cli._format_value({"a": "é"}, "json") == '{"a": "é"}'
    assert cli._format_value("SELECT 1", "grammar") == "SELECT 1"
    assert cli._format_value("yes", "choices") == "yes"


# -- mask ----------------------------------------------------------------------------------------


def test_mask_lists_allowed_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mask", "--grammar", "json", "--tokenizer", "byte", "--prefix", '{"a": tru']) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 of 257 tokens allowed; forced next bytes: b'e'")
    assert f"  {ord('e'):>7}  b'e'" in out


def test_mask_with_a_regex_and_a_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mask", "--regex", "[ab]c", "--tokenizer", "byte", "--show", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 of 257 tokens allowed")
    assert "b'a'" in out and "b'b'" in out
    assert main(["mask", "--schema", str(PERSON), "--tokenizer", "byte", "--prefix", "{"]) == 0
    assert 'forced next bytes: b\'"name": "\'' in capsys.readouterr().out


def test_mask_invalid_prefix_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mask", "--regex", "[ab]c", "--tokenizer", "byte", "--prefix", "x"]) == 1
    assert "not a valid prefix" in capsys.readouterr().out


# -- argument errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["check"],
        ["check", "--regex", "a", "--grammar", "json"],
        ["check", "--choices", "a", "b"],
        ["mask", "--pydantic", "m:C"],
        ["generate", "hi"],
        ["generate", "hi", "--regex", "a", "--choices", "x"],
        ["generate", "hi", "--regex", "a", "--max-tokens", "many"],
        ["generate", "hi", "--schema", "s.json", "--whitespace", "lots"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["generate", "--regex", "a"], "give either a PROMPT or --batch-file"),
        (["generate", "p", "--regex", "a", "--batch-file", "f.txt"], "either a PROMPT"),
        (["generate", "p", "--regex", "a", "--stream", "--json"], "--stream"),
        (["generate", "p", "--regex", "a", "--batch-size", "0"], "--batch-size"),
    ],
)
def test_generate_option_conflicts_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: python -m constrain generate" in err
    assert message in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--schema", "missing.json"], "--schema 'missing.json': no such file"),
        (["--regex", "(?=a)b"], "RegexError"),
        (["--pydantic", "no_such_module_xyz:M"], "cannot import"),
        (["--grammar", "no_such_grammar"], "no_such_grammar"),
        (["--choices", "a", "--batch-file", "missing.txt"], "--batch-file 'missing.txt'"),
    ],
)
def test_generate_constraint_errors_exit_1_before_loading_a_model(
    flags: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def no_model(args: object) -> None:
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(cli, "_load", no_model)
    argv = ["generate", *flags] if "--batch-file" in flags else ["generate", "p", *flags]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert message in err


def test_generate_empty_batch_file_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "prompts.txt"
    path.write_text("\n  \n", encoding="utf-8")
    assert main(["generate", "--regex", "a", "--batch-file", str(path)]) == 1
    assert "has no prompts" in capsys.readouterr().err


def test_generate_missing_default_model_prints_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from constrain import request
    from constrain.integrations import default_model

    monkeypatch.setattr(request, "_DEFAULT", [])  # no default model loaded yet
    monkeypatch.setattr(default_model, "DEFAULT_MODEL_PACKAGE", "no_such_model_package_xyz")
    assert main(["generate", "hi", "--choices", "a", "b"]) == 1
    err = capsys.readouterr().err
    assert "ModelNotFoundError" in err
    assert default_model.DEFAULT_MODEL_INSTALL in err


def test_generate_missing_model_path_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-model"
    assert main(["generate", "hi", "--regex", "a", "--model", str(missing)]) == 1
    err = capsys.readouterr().err
    assert "ModelNotFoundError" in err
    assert str(missing) in err


# -- progress, demo schema, entry points -------------------------------------------------------


def test_progress_is_off_when_quiet_or_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    assert not cli._progress_enabled(argparse.Namespace(quiet=False))  # captured: not a TTY
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert cli._progress_enabled(argparse.Namespace(quiet=False))
    assert not cli._progress_enabled(argparse.Namespace(quiet=True))


def test_spinner_shows_on_stderr_only_when_enabled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "SPINNER_DELAY_S", 0.0)
    with cli._spinner("compiling", enabled=False):
        time.sleep(0.3)
    assert capsys.readouterr().err == ""
    with cli._spinner("compiling", enabled=True):
        time.sleep(0.3)
    captured = capsys.readouterr()
    assert "compiling..." in captured.err
    assert captured.out == ""


def test_demo_schema_is_valid_and_compiles_strictly() -> None:
    import jsonschema

    from constrain import Compiler, Grammar
    from constrain.testing import byte_vocabulary

    path = cli.demo_schema_path()
    assert path.resolve() == PERSON.resolve()
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    grammar = Grammar.from_json_schema(schema)
    assert grammar.warnings == ()
    Compiler(byte_vocabulary()).compile(grammar)
    # the demo's schema has the shapes the README promises
    props = schema["properties"]
    assert props["address"]["type"] == "object"
    assert "enum" in props["role"]
    assert {"minimum", "maximum"} <= props["age"].keys()
    assert "maxItems" in props["skills"]
    assert "maxLength" in props["name"]


def test_console_script_is_constrain_llm() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"] == {"constrain-llm": "constrain.cli:main"}


def test_python_m_constrain_exit_status() -> None:
    for text, code, out in (("ab", 0, "accepted"), ("ba", 1, "rejected at offset 0")):
        proc = subprocess.run(
            [sys.executable, "-m", "constrain", "check", "--regex", "a+b", text],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert proc.returncode == code, proc.stderr
        assert proc.stdout.startswith(out)


@pytest.mark.slow
def test_demo_engine_runs_on_the_llama3_vocabulary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--engine"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Llama 3.2 vocabulary: 128256 tokens")
    for label in ("regex (US phone)", "json", "sql"):
        assert f"{label}: compile " in out
    assert "BUG" not in out
    assert out.endswith('jump-forward at the start of a record grammar: b\'{"name": "\'\n')


# -- generate's output paths, with a stand-in for the model --------------------------------------


class _FakeModel:
    def __init__(self) -> None:
        self.compiled: list[object] = []

    def compile(self, grammar: object) -> None:
        self.compiled.append(grammar)


@pytest.fixture
def fake_generate(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Replace model loading and generation.generate/stream; record each call's arguments."""
    from constrain import generation
    from constrain.generation import GenerationResult

    calls: list[dict[str, object]] = []
    model = _FakeModel()
    monkeypatch.setattr(cli, "_load", lambda args: model)

    def result(prompt: str, value: object) -> GenerationResult:
        text = value if isinstance(value, str) else json.dumps(value)
        return GenerationResult(value, text, "stop", len(prompt), 3, 0.5, 0.1, -1.0)

    def generate(prompt: object, **kwargs: object) -> object:
        calls.append({"prompt": prompt, **kwargs})
        assert kwargs["model"] is model and kwargs["return_info"] is True
        value: object = kwargs.get("choices", ["x"])[0]  # type: ignore[index]
        if kwargs.get("schema") is not None:
            value = {"name": "Ana", "n": 1}
        if isinstance(prompt, list):
            return [result(p, f"{value}-{p}") for p in prompt]
        return result(str(prompt), value)

    def stream(prompt: object, **kwargs: object) -> object:
        calls.append({"prompt": prompt, **kwargs})
        yield from ("12", "3-", "4567")

    monkeypatch.setattr(generation, "generate", generate)
    monkeypatch.setattr(generation, "stream", stream)
    return calls


def test_generate_prints_the_value(
    fake_generate: list[dict[str, object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "hi", "--choices", "yes", "no", "--max-tokens", "7"]) == 0
    assert capsys.readouterr().out == "yes\n"
    call = fake_generate[-1]
    assert call["prompt"] == "hi" and call["choices"] == ["yes", "no"]
    assert call["max_tokens"] == 7 and call["temperature"] == 0.0 and call["seed"] is None
    schema = _write(tmp_path / "s.json", {"type": "object"})
    assert main(["generate", "hi", "--schema", schema, "--whitespace", "flexible"]) == 0
    assert capsys.readouterr().out == '{"name": "Ana", "n": 1}\n'
    assert fake_generate[-1]["json_options"] == {"whitespace": "flexible"}


def test_generate_json_prints_one_object(
    fake_generate: list[dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "hi", "--choices", "a", "--json", "--temperature", "0.5", "--seed", "3"]
    assert main(argv) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["value"] == info["text"] == "a"
    assert info["finish_reason"] == "stop"
    assert (info["prompt_tokens"], info["output_tokens"]) == (2, 3)
    assert info["seconds"] >= 0.5 and info["compile_seconds"] >= 0.1
    assert info["tokens_per_second"] > 0
    assert (fake_generate[-1]["temperature"], fake_generate[-1]["seed"]) == (0.5, 3)


def test_generate_stream_writes_the_pieces(
    fake_generate: list[dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "hi", "--regex", "[0-9-]+", "--stream"]) == 0
    assert capsys.readouterr().out == "123-4567\n"
    assert fake_generate[-1]["regex"] == "[0-9-]+"


def test_generate_batch_file_in_batches(
    fake_generate: list[dict[str, object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "prompts.txt"
    path.write_text("p1\n\np2\np3\n  \np4\np5\n", encoding="utf-8")
    argv = ["generate", "--batch-file", str(path), "--choices", "v", "--batch-size", "2"]
    assert main(argv) == 0
    assert [c["prompt"] for c in fake_generate] == [["p1", "p2"], ["p3", "p4"], ["p5"]]
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [f"v-p{i}" for i in range(1, 6)]
    fake_generate.clear()
    assert main([*argv, "--json", "--batch-size", "8"]) == 0
    assert [c["prompt"] for c in fake_generate] == [["p1", "p2", "p3", "p4", "p5"]]
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["value"] for r in rows] == [f"v-p{i}" for i in range(1, 6)]


def test_generate_batch_from_stdin(
    fake_generate: list[dict[str, object]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nb\n"))
    assert main(["generate", "--batch-file", "-", "--choices", "v"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"v-a"', '"v-b"']


def test_generate_passes_the_sampler(
    fake_generate: list[dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "hi", "--choices", "a", "--sampler", "smc", "--particles", "4"]) == 0
    assert (fake_generate[-1]["sampler"], fake_generate[-1]["n_particles"]) == ("smc", 4)
    assert main(["generate", "hi", "--choices", "a", "--sampler", "awrs"]) == 0
    assert fake_generate[-1]["sampler"] == "awrs" and "n_particles" not in fake_generate[-1]
    capsys.readouterr()
    assert main(["generate", "hi", "--choices", "a", "--particles", "4"]) == 2
    assert "--particles" in capsys.readouterr().err


def test_check_names_the_line_and_column_of_a_json_syntax_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"type": "object",\n "properties": {"a": {"type": "integer",}}}\n')
    assert main(["check", "--schema", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"--schema {str(path)!r}: not valid JSON at line 2, column 41" in err
    assert "JSONDecodeError" not in err and err.rstrip().endswith("^")


@pytest.mark.parametrize("quiet", [False, True])
def test_notices_go_to_stderr_unless_quiet(
    quiet: bool,
    fake_generate: list[dict[str, object]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging

    from constrain import generation

    fake = generation.generate

    def generate_and_notice(prompt: object, **kwargs: object) -> object:
        logging.getLogger("constrain").warning("max_tokens=7 ended it")
        return fake(prompt, **kwargs)

    monkeypatch.setattr(generation, "generate", generate_and_notice)
    assert main(["generate", "hi", "--choices", "a", *(["--quiet"] if quiet else [])]) == 0
    captured = capsys.readouterr()
    assert captured.out == "a\n"
    assert captured.err == ("" if quiet else "constrain: max_tokens=7 ended it\n")


def test_generate_help_says_each_call_loads_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Each call loads the model" in out and "model = constrain.load_model()" in out


def test_silencing_reaches_the_gguf_conversion_bar() -> None:
    """transformers' GGUF conversion uses a plain tqdm its progress switch does not reach."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    from constrain.integrations.progress import silence_progress_bars

    bar = gguf_utils.tqdm
    with silence_progress_bars(True):
        assert gguf_utils.tqdm([1, 2]).disable  # type: ignore[attr-defined]
        assert not hf_logging.is_progress_bar_enabled()
    assert gguf_utils.tqdm is bar  # type: ignore[attr-defined]
    with silence_progress_bars(False):
        assert gguf_utils.tqdm is bar  # type: ignore[attr-defined]
