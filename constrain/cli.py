"""Command line: ``python -m constrain <command>``, or the ``constrain-llm`` console script.

Commands
--------
``generate PROMPT (--schema F | --pydantic M:C | --regex R | --grammar G | --choices A B ...)``
    Generate with a language model (default: the embedded SmolLM2-135M-Instruct, or
    ``--model PATH``) under the constraint, and print the value: the JSON of a schema or
    pydantic model, the string of a regex, grammar or choice. ``--json`` prints one JSON object
    with the value, the text, the finish reason, token counts and timings; ``--stream`` prints
    the text as it is produced; ``--batch-file FILE`` generates one prompt per line, in batches
    of ``--batch-size``, and prints one JSON result per line.
``check (--grammar G | --schema F | --pydantic M:C | --regex R) [TEXT]``
    Without TEXT: compile the constraint and print its statistics (rules, terminals, lexer
    states, table sizes, compile time) and, for a schema, every keyword that cannot be enforced
    with its JSON pointer (exit 1; ``--lenient`` lists them as warnings instead). With TEXT (or
    ``-`` for standard input): whether the text is in the language; on rejection, where.
``mask``
    The tokens a grammar allows after a prefix.
``demo``
    Generate a JSON record for the shipped example schema ``person.schema.json`` with the
    default model, print it and a one-line summary (tokens, tokens/s, compile and load time).
    ``demo --engine`` runs the engine alone on the Llama 3.2 tokenizer (128k tokens): compile a
    regex, the JSON grammar and the SQL grammar, drive them with real texts token by token, and
    print timings and the jump-forward bytes.

Every command exits with 0 on success, 1 on an error or a rejected text (the message goes to
standard error) and 2 on a usage error. Progress bars and spinners go to standard error, only
when it is a terminal; notices (first-run work, an output ``--max-tokens`` ended) as
``constrain: ...`` lines; neither with ``--quiet``. Each ``generate`` loads the model (1-2 s):
for many prompts give ``--batch-file``, or load once in Python (``constrain.load_model()``).

(The console script is ``constrain-llm``: the name ``constrain`` belongs to another PyPI
project.)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from constrain.errors import CliError, ConstrainError, JsonSchemaError, caret_context
from constrain.integrations.progress import notices_to, silence_progress_bars
from constrain.ir import Grammar

if TYPE_CHECKING:
    from constrain.compiler import CompiledGrammar
    from constrain.generation import GenerationResult
    from constrain.integrations.transformers import Model
    from constrain.output import OutputType
    from constrain.vocab.vocabulary import Vocabulary

__all__ = ["main", "resolve_object"]

PROG = "python -m constrain"
SCRIPT = "constrain-llm"
DEMO_SCHEMA = "person.schema.json"
DEMO_PROMPT = (
    "Describe a fictional software engineer who lives in Lisbon, Portugal, as a JSON record "
    "with their name, age, role, address and skills."
)
SPINNER_DELAY_S = 0.5


def _eprint(*parts: Any) -> None:
    """Print to standard error."""
    print(*parts, file=sys.stderr)


# -- progress ----------------------------------------------------------------------------------


def _progress_enabled(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


@contextlib.contextmanager
def _spinner(label: str, enabled: bool) -> Iterator[None]:
    """Show ``label`` and the elapsed time on stderr while the block runs longer than 0.5 s."""
    if not enabled:
        yield
        return
    from tqdm import tqdm

    done = threading.Event()

    def spin() -> None:
        if done.wait(SPINNER_DELAY_S):
            return
        with tqdm(
            desc=label, bar_format="{desc}... {elapsed}", file=sys.stderr, leave=False
        ) as bar:
            while not done.wait(0.25):
                bar.refresh()

    thread = threading.Thread(target=spin, name="constrain-spinner", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


# -- resolving constraints ---------------------------------------------------------------------


def resolve_object(spec: str) -> Any:
    """Return the object named by ``module:attr`` or ``path/to/file.py:attr``.

    The current directory is importable (as with ``python -m``); a file's folder is put on
    ``sys.path`` so that it can import its neighbours. ``attr`` may be dotted
    (``module:Outer.Inner``).

    Parameters
    ----------
    spec : str
        ``"package.module:Name"`` or ``"file.py:Name"``.

    Raises
    ------
    CliError
        If the spec is malformed, the module cannot be imported or has no such attribute.
    """
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise CliError(f"--pydantic {spec!r}: expected MODULE:NAME or path/to/file.py:NAME")
    is_file = module_part.endswith(".py") or "/" in module_part or os.sep in module_part
    if is_file:
        path = Path(module_part).expanduser().resolve()
        if not path.is_file():
            raise CliError(f"--pydantic {spec!r}: no such file {module_part!r}")
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = path.stem if path.stem.isidentifier() else "_constrain_cli_module"
        loaded = sys.modules.get(name)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == path:
            module = loaded
        else:
            spec_obj = importlib.util.spec_from_file_location(name, path)
            if spec_obj is None or spec_obj.loader is None:
                raise CliError(f"--pydantic {spec!r}: cannot import {module_part!r}")
            module = importlib.util.module_from_spec(spec_obj)
            sys.modules[name] = module  # pydantic resolves forward references through it
            try:
                spec_obj.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
    else:
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.insert(0, cwd)
        try:
            module = importlib.import_module(module_part)
        except ImportError as err:
            raise CliError(f"--pydantic {spec!r}: cannot import {module_part!r}: {err}") from err
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CliError(
                f"--pydantic {spec!r}: {module_part!r} has no attribute {attr!r}"
            ) from None
    return obj


def _json_options(args: argparse.Namespace, *, lenient: bool | None = None) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if getattr(args, "whitespace", None):
        opts["whitespace"] = args.whitespace
    flag = getattr(args, "lenient", False) if lenient is None else lenient
    if flag:
        opts["lenient"] = True
    return opts


def _constraint_kwargs(args: argparse.Namespace, *, lenient: bool | None = None) -> dict[str, Any]:
    """Return the constraint keywords of :func:`constrain.generate` given by ``args``."""
    opts = _json_options(args, lenient=lenient) or None
    if getattr(args, "pydantic", None) is not None:
        return {"schema": resolve_object(args.pydantic), "json_options": opts}
    if args.schema is not None:
        path = Path(args.schema)
        if not path.is_file():
            raise CliError(f"--schema {args.schema!r}: no such file")
        _check_json_file(path)
        return {"schema": path, "json_options": opts}
    if args.regex is not None:
        return {"regex": args.regex}
    if getattr(args, "choices", None) is not None:
        return {"choices": args.choices}
    return {"grammar": args.grammar}


def _check_json_file(path: Path) -> None:
    """Raise CliError naming the line and column of a JSON syntax error in ``path``."""
    text = path.read_text(encoding="utf-8")
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        raise CliError(
            f"--schema {str(path)!r}: not valid JSON at line {err.lineno}, column {err.colno}: "
            f"{err.msg}\n{caret_context(text, err.pos)}"
        ) from None


def _output(args: argparse.Namespace, *, lenient: bool | None = None) -> OutputType:
    """Return the output type of the constraint options of ``args``."""
    from constrain.output import output_type

    return output_type(**_constraint_kwargs(args, lenient=lenient))


def _vocabulary(name: str) -> Vocabulary:
    from constrain import testing
    from constrain.vocab.vocabulary import Vocabulary

    if name == "llama3":
        return testing.llama3_vocabulary()
    if name == "qwen":
        return testing.qwen_vocabulary()
    if name == "byte":
        return testing.byte_vocabulary()
    path = Path(name)
    if not path.is_file():
        raise CliError(f"--tokenizer {name!r}: use byte, llama3, qwen or a tokenizer.json path")
    from tokenizers import Tokenizer

    return Vocabulary.from_huggingface(Tokenizer.from_file(str(path)))


# -- check -------------------------------------------------------------------------------------


def _describe(args: argparse.Namespace) -> str:
    for flag in ("schema", "pydantic", "regex", "grammar"):
        value = getattr(args, flag, None)
        if value is not None:
            return f"{flag} {value}"
    return "constraint"


def _pointer_message(err: JsonSchemaError) -> str:
    """``pointer: message`` (the message without its trailing ``(at pointer)``)."""
    text = str(err)
    suffix = f" (at {err.pointer})"
    if text.endswith(suffix):
        text = text[: -len(suffix)]
    return f"{err.pointer}: {text}"


def _schema_problems(args: argparse.Namespace, err: JsonSchemaError) -> tuple[list[str], bool]:
    """Return every unsupported keyword of a schema, and whether ``--lenient`` would compile it.

    The strict compile stops at the first keyword (``err``); a lenient compile lists them all
    (each as ``pointer: message``).
    """
    if getattr(args, "lenient", False):
        return [_pointer_message(err)], False
    try:
        problems = _not_enforced(_output(args, lenient=True).grammar.warnings)
        fixable = True
    except JsonSchemaError as other:
        problems, fixable = [_pointer_message(other)], False
    except (ConstrainError, ValueError):
        problems, fixable = [], False
    if not any(p.startswith(f"{err.pointer}: ") for p in problems):
        problems.insert(0, _pointer_message(err))
    return problems, fixable


def _stats(compiled: CompiledGrammar) -> list[tuple[str, str]]:
    par, lex = compiled.parser, compiled.lexer
    return [
        ("rules", f"{len(compiled.grammar.rules)} ({par.num_nonterminals} nonterminals)"),
        ("Earley items", str(par.num_items)),
        ("terminals", f"{par.num_terminals} ({len(compiled.grammar.ignore)} ignored)"),
        ("lexer states", f"{lex.trans.shape[0]} x {lex.trans.shape[1]} byte classes"),
        ("static tables", _size(compiled.nbytes())),
        ("token tables", f"{len(compiled.tables)} precomputed ({_size(compiled.tables.nbytes())})"),
        ("vocabulary", f"{compiled.vocab.size} tokens"),
    ]


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024**2:.1f} MiB"


def _cmd_check(args: argparse.Namespace) -> int:
    from constrain.compiler import Compiler
    from constrain.testing import byte_vocabulary

    t0 = time.perf_counter()
    try:
        output = _output(args)
    except JsonSchemaError as err:
        problems, fixable = _schema_problems(args, err)
        _eprint(f"error: {_describe(args)}: {len(problems)} problem(s):")
        for line in problems:
            _eprint(f"  {line}")
        if fixable:
            _eprint("pass --lenient to compile without these keywords (docs/json_schema.md)")
        return 1
    front_ms = (time.perf_counter() - t0) * 1e3
    if args.text is not None:
        return _check_text(args, Compiler(byte_vocabulary()).compile(output.grammar))
    vocab = _vocabulary(args.tokenizer)
    t1 = time.perf_counter()
    with _spinner("compiling", _progress_enabled(args)):
        compiled = Compiler(vocab).compile(output.grammar)
    compile_ms = (time.perf_counter() - t1) * 1e3
    print(f"{_describe(args)}: compiles")
    rows = [("front end", f"{front_ms:.1f} ms"), ("compile", f"{compile_ms:.1f} ms")]
    rows += _stats(compiled)
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    warnings = _not_enforced(output.grammar.warnings)
    bounded = [w for w in output.grammar.warnings if w not in warnings]
    for title, lines in (
        ("keyword(s) not enforced (--lenient)", warnings),
        ("number(s) with bounded digits, as generate writes them", bounded),
    ):
        if lines:
            print(f"{len(lines)} {title}:\n" + "\n".join(f"  {line}" for line in lines))
    return 0


def _not_enforced(warnings: Sequence[str]) -> list[str]:
    """Return the warnings that name keywords not enforced (not ``max_number_digits`` notes)."""
    from constrain.frontends.json_schema.emit import NUMBER_DIGITS_NOTE

    return [w for w in warnings if not w.endswith(NUMBER_DIGITS_NOTE)]


def _check_text(args: argparse.Namespace, compiled: CompiledGrammar) -> int:
    from constrain.matcher import Matcher

    text = sys.stdin.read() if args.text == "-" else args.text
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


# -- mask --------------------------------------------------------------------------------------


def _cmd_mask(args: argparse.Namespace) -> int:
    from constrain.compiler import Compiler
    from constrain.matcher import Matcher

    vocab = _vocabulary(args.tokenizer)
    output = _output(args)
    with _spinner("compiling", _progress_enabled(args)):
        m = Matcher(Compiler(vocab).compile(output.grammar))
    if not m.accept_bytes(args.prefix.encode()):
        print("the prefix is not a valid prefix of the grammar")
        return 1
    ids = m.allowed_token_ids()
    print(f"{len(ids)} of {vocab.size} tokens allowed; forced next bytes: {m.forced_bytes()!r}")
    for t in ids[: args.show]:
        print(f"  {int(t):>7}  {vocab.token_bytes_of(int(t))!r}")
    return 0


# -- generate ----------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON data (a pydantic model by its field aliases)."""
    if isinstance(value, (str, int, float, bool, type(None), list, dict)):
        return value
    import pydantic
    import pydantic_core

    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    return pydantic_core.to_jsonable_python(value, by_alias=True)


def _format_value(value: Any, kind: str) -> str:
    if kind in ("regex", "grammar", "choices"):
        return str(value)
    return json.dumps(_jsonable(value), ensure_ascii=False)


def _info(result: GenerationResult, extra_s: float) -> dict[str, Any]:
    seconds = result.seconds + extra_s
    return {
        "value": _jsonable(result.value),
        "text": result.text,
        "finish_reason": result.finish_reason,
        "prompt_tokens": result.prompt_tokens,
        "output_tokens": result.output_tokens,
        "seconds": round(seconds, 4),
        "compile_seconds": round(max(result.compile_seconds, extra_s), 4),
        "tokens_per_second": round(result.output_tokens / seconds, 2) if seconds > 0 else 0.0,
    }


def _load(args: argparse.Namespace) -> Model:
    from constrain.generation import default_model
    from constrain.integrations.transformers import load_model

    show = _progress_enabled(args)
    with _spinner("loading model", show), silence_progress_bars(not show):
        return default_model() if args.model is None else load_model(args.model)


def _read_prompts(source: str) -> list[str]:
    if source == "-":
        lines = sys.stdin.read().splitlines()
    else:
        path = Path(source)
        if not path.is_file():
            raise CliError(f"--batch-file {source!r}: no such file")
        lines = path.read_text(encoding="utf-8").splitlines()
    prompts = [line for line in lines if line.strip()]
    if not prompts:
        raise CliError(f"--batch-file {source!r} has no prompts (one per line)")
    return prompts


def _cmd_generate(args: argparse.Namespace) -> int:
    from constrain import generation
    from constrain.output import output_type

    if (args.prompt is None) == (args.batch_file is None):
        raise _UsageError("give either a PROMPT or --batch-file")
    if args.stream and (args.json or args.batch_file is not None):
        raise _UsageError("--stream prints one prompt's text; not with --json or --batch-file")
    if args.batch_size < 1:
        raise _UsageError("--batch-size must be at least 1")
    prompts = _read_prompts(args.batch_file) if args.batch_file is not None else [args.prompt]
    constraint = _constraint_kwargs(args)
    output = output_type(**constraint)  # constraint errors before the model loads
    model = _load(args)
    show = _progress_enabled(args)
    t0 = time.perf_counter()
    with _spinner("compiling", show):
        model.compile(output.grammar)  # cached: generate() below finds it compiled
    compile_s = time.perf_counter() - t0
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "frequency_penalty": args.frequency_penalty,
        "seed": args.seed,
        "system": args.system,
        **constraint,
    }
    if args.particles is not None and args.sampler != "smc":
        raise _UsageError("--particles only applies with --sampler smc")
    if args.sampler is not None:
        kwargs["sampler"] = args.sampler
        if args.particles is not None:
            kwargs["n_particles"] = args.particles
    if args.speculative:
        names = [n.strip() for n in args.speculative.split(",") if n.strip()]
        kwargs["speculative"] = True if names == ["all"] else names
    if args.stream:
        out = sys.stdout
        for piece in generation.stream(args.prompt, **kwargs):
            out.write(piece)
            out.flush()
        out.write("\n")
        return 0
    if args.batch_file is None:
        with _spinner("generating", show):
            result = generation.generate(args.prompt, return_info=True, **kwargs)
        if args.json:
            print(json.dumps(_info(result, compile_s), ensure_ascii=False))
        else:
            print(_format_value(result.value, output.kind))
        return 0
    from tqdm import tqdm

    with tqdm(
        total=len(prompts), unit="prompt", desc="generating", file=sys.stderr, disable=not show
    ) as bar:
        for start in range(0, len(prompts), args.batch_size):
            chunk = prompts[start : start + args.batch_size]
            results = generation.generate(chunk, return_info=True, **kwargs)
            for result in results:
                row = (
                    _info(result, compile_s if start == 0 else 0.0)
                    if args.json
                    else _jsonable(result.value)
                )
                # tqdm.write clears the bar first when both go to the same terminal
                tqdm.write(json.dumps(row, ensure_ascii=False), file=sys.stdout)
                sys.stdout.flush()
            bar.update(len(chunk))
    return 0


# -- demo --------------------------------------------------------------------------------------


def demo_schema_path() -> Path:
    """Return the path of the example schema the demo generates for (``person.schema.json``)."""
    from importlib.resources import as_file, files

    resource = files("constrain.grammars").joinpath(DEMO_SCHEMA)
    with as_file(resource) as path:
        if Path(path).is_file():
            return Path(path)
    local = Path(__file__).resolve().parent.parent / "grammars" / DEMO_SCHEMA
    if local.is_file():
        return local
    raise CliError(f"the example schema {DEMO_SCHEMA} is not installed with constrain")


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.engine:
        return _engine_demo()
    from constrain import generation

    schema = demo_schema_path()
    model = _load(args)
    load_s = model.load_seconds
    print(f"model: {model.name} ({model.device}, loaded in {load_s:.1f} s)", file=sys.stderr)
    print(f"schema: {schema.name}\nprompt: {args.prompt}", file=sys.stderr)
    with _spinner("generating", _progress_enabled(args)):
        result = generation.generate(
            args.prompt,
            schema=schema,
            model=model,
            max_tokens=args.max_tokens,
            return_info=True,
        )
    print(json.dumps(result.value, indent=2, ensure_ascii=False))
    print(
        f"{result.output_tokens} tokens in {result.seconds:.2f} s "
        f"({result.tokens_per_second:.1f} tokens/s) | compile {result.compile_seconds * 1e3:.0f} "
        f"ms | model load {load_s:.1f} s | valid against {schema.name}",
        file=sys.stderr,
    )
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


def _engine_demo() -> int:
    import numpy as np
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


# -- the parser --------------------------------------------------------------------------------


class _UsageError(Exception):
    """A combination of options argparse cannot express (exit status 2)."""


def _add_constraint(p: argparse.ArgumentParser, *, choices: bool, pydantic: bool) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--schema", metavar="FILE", help="a JSON Schema file")
    if pydantic:
        src.add_argument(
            "--pydantic",
            metavar="MODULE:NAME",
            help="a pydantic model (or any type pydantic validates): module:Name or file.py:Name",
        )
    src.add_argument("--regex", metavar="R", help="a Python regular expression (full match)")
    src.add_argument(
        "--grammar", metavar="G", help="a shipped grammar name (json, sql, ...) or a .lark file"
    )
    if choices:
        src.add_argument(
            "--choices",
            nargs="+",
            metavar="C",
            help="the output is one of these (give PROMPT before --choices)",
        )
    p.add_argument(
        "--whitespace",
        choices=("compact", "spaced", "flexible", "indent"),
        help="JSON layout a schema's output may have (default spaced: json.dumps's ', ' and "
        "': ', as generate() writes)",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="compile a schema without the keywords that cannot be enforced (warnings)",
    )


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    script = Path(sys.argv[0]).name.startswith(SCRIPT) if sys.argv else False
    parser = argparse.ArgumentParser(
        prog=SCRIPT if script else PROG,
        description="constrain: language-model output that follows a JSON Schema, regex or "
        "grammar.",
        epilog="Exit status: 0 success, 1 error or rejected text, 2 usage error.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars or notices on stderr"
    )

    g = sub.add_parser(
        "generate",
        parents=[quiet],
        help="generate constrained output with a language model",
        description="Generate under a constraint; print the value. Each call loads the model "
        "(1-2 s; the first use also converts it and compiles kernels, 1-2 min, once). For many "
        "prompts: --batch-file, or in Python model = constrain.load_model() once, then "
        "constrain.generate(..., model=model).",
    )
    g.add_argument("prompt", nargs="?", help="the prompt (or use --batch-file)")
    _add_constraint(g, choices=True, pydantic=True)
    g.add_argument("--model", metavar="PATH", help="a local Hugging Face model folder or .gguf")
    g.add_argument("--max-tokens", type=int, default=512, metavar="N", help="default 512")
    g.add_argument("--temperature", type=float, default=0.0, metavar="T", help="0: greedy")
    g.add_argument(
        "--frequency-penalty", type=float, default=0.0, metavar="F",
        help="lower a token's logit by F per earlier use in the output (repetition loops)",
    )  # fmt: skip
    g.add_argument("--seed", type=int, metavar="S", help="seed of the sampler")
    g.add_argument(
        "--sampler",
        choices=("greedy", "masked", "awrs", "smc", "asap", "dccd"),
        help="how tokens are chosen (docs/sampling.md); default: greedy, or masked sampling "
        "with --temperature",
    )
    g.add_argument(
        "--particles", type=int, metavar="N", help="particles of --sampler smc (default 32)"
    )
    g.add_argument(
        "--speculative",
        nargs="?",
        const="all",
        metavar="DRAFTERS",
        help="speculative decoding, exact (greedy: the same output, faster): 'all' (the "
        "default when given without a value) or comma-separated grammar,lookup,early_exit",
    )
    g.add_argument("--system", metavar="TEXT", help="system message (chat models)")
    g.add_argument("--json", action="store_true", help="print value, text, token counts, times")
    g.add_argument("--stream", action="store_true", help="print the text as it is produced")
    g.add_argument("--batch-file", metavar="FILE", help="one prompt per line (- for stdin)")
    g.add_argument("--batch-size", type=int, default=8, metavar="N", help="default 8")

    c = sub.add_parser(
        "check",
        parents=[quiet],
        help="compile a constraint and print its statistics, or check a text",
        description="Without TEXT: compile and print statistics (and a schema's unsupported "
        "keywords). With TEXT: is it in the language?",
    )
    _add_constraint(c, choices=False, pydantic=True)
    c.add_argument("text", nargs="?", help="the text to check, or - for standard input")
    c.add_argument(
        "--tokenizer",
        default="byte",
        help="vocabulary for the statistics: byte (default), llama3, qwen or a tokenizer.json",
    )

    m = sub.add_parser("mask", parents=[quiet], help="the tokens a grammar allows after a prefix")
    _add_constraint(m, choices=False, pydantic=False)
    m.add_argument("--prefix", default="", help="text generated so far")
    m.add_argument("--tokenizer", default="llama3", help="llama3, qwen, byte or a path")
    m.add_argument("--show", type=int, default=20, help="how many tokens to list")

    d = sub.add_parser(
        "demo",
        parents=[quiet],
        help="generate a JSON record for the example schema with the default model",
    )
    d.add_argument(
        "--engine", action="store_true", help="the engine alone on the Llama 3.2 tokenizer"
    )
    d.add_argument("--model", metavar="PATH", help="a local model instead of the default")
    d.add_argument("--prompt", default=DEMO_PROMPT, help="the prompt")
    d.add_argument("--max-tokens", type=int, default=160, metavar="N", help="default 160")
    return parser, {"generate": g, "check": c, "mask": m, "demo": d}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser, subparsers = _parser()
    args = parser.parse_args(argv)
    commands = {
        "generate": _cmd_generate,
        "check": _cmd_check,
        "mask": _cmd_mask,
        "demo": _cmd_demo,
    }
    try:
        with notices_to(sys.stderr, quiet=getattr(args, "quiet", False)):
            return commands[args.command](args)
    except _UsageError as err:
        sub = subparsers[args.command]
        sub.print_usage(sys.stderr)
        print(f"{sub.prog}: error: {err}", file=sys.stderr)
        return 2
    except (ConstrainError, CliError, OSError, ValueError) as err:
        # ConstrainError covers grammar and schema errors, IncompleteOutputError and
        # ModelNotFoundError (whose message says how to install the default model).
        _print_error(err, sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _print_error(err: BaseException, stream: IO[str]) -> None:
    name = type(err).__name__
    print(f"error: {name}: {err}", file=stream)
    partial = getattr(err, "partial_text", None)
    if partial:
        print(f"partial output: {partial!r}", file=stream)
