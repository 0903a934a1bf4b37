"""The public surface of ``constrain`` and the layering of its modules.

- ``sorted(constrain.__all__)`` is snapshotted: a change to the public names must be deliberate
  (update ``PUBLIC_NAMES`` in the same commit and say why).
- ``import constrain`` is cheap: it loads neither torch, numba nor transformers.
- Every module imports only from its own or earlier pipeline stages (see ``STAGES``), checked
  on the source with ``ast``, so it also covers imports inside functions.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import constrain

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "constrain"

PUBLIC_NAMES = [
    "CompileLimitError",
    "CompileLimits",
    "CompiledGrammar",
    "Compiler",
    "ConstrainError",
    "GenerationResult",
    "Grammar",
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


def test_public_names_snapshot() -> None:
    assert sorted(constrain.__all__) == PUBLIC_NAMES, (
        "constrain.__all__ changed; public names are frozen (STYLE.md section 3, rule 10): "
        "update PUBLIC_NAMES here only for a deliberate API change"
    )
    assert len(set(constrain.__all__)) == len(constrain.__all__)
    assert dir(constrain) == sorted(constrain.__all__)


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_public_name_resolves(name: str) -> None:
    value = getattr(constrain, name)
    assert value is not None
    if name != "__version__":
        assert getattr(value, "__module__", "").startswith("constrain"), (name, value)


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        constrain.no_such_name  # noqa: B018


def _modules_after(code: str, tmp_path: Path) -> list[str]:
    """Run ``code`` in a fresh interpreter (outside the repo) and return its ``sys.modules``."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


HEAVY = ("torch", "numba", "transformers", "tokenizers", "triton")


def _heavy(modules: list[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


def test_import_is_light(tmp_path: Path) -> None:
    loaded = _modules_after("import constrain", tmp_path)
    assert _heavy(loaded) == [], f"`import constrain` imports {_heavy(loaded)}"


def test_front_ends_are_light(tmp_path: Path) -> None:
    """Building grammars (stages 1-2) needs no kernel, tensor library or tokenizer."""
    code = (
        "import constrain\n"
        "constrain.Grammar.from_regex(r'[a-z]+\\d?')\n"
        "constrain.Grammar.from_lark('start: \"a\" B\\nB: /b+/')\n"
        "constrain.Grammar.builtin('json')"
    )
    loaded = _modules_after(code, tmp_path)
    assert _heavy(loaded) == [], f"front ends import {_heavy(loaded)}"


# -- stage layering ---------------------------------------------------------------------------

# Pipeline stages, earliest first (docs/architecture.md, STYLE.md section 4.3). A module may
# import modules of its own stage or an earlier one. Prefixes match whole dotted components.
STAGES: list[tuple[str, ...]] = [
    # the foundations; constrain.npz reads and writes the .npz files of vocabularies and grammars
    (
        "constrain.errors",
        "constrain._gc",
        "constrain._types",
        "constrain._version",
        "constrain.grammars",
        "constrain.npz",
    ),
    ("constrain.ir",),  # regex nodes, Grammar, case folding, printer
    ("constrain.automata",),  # IR -> byte-level DFAs and parser tables
    # front ends build IR; the JSON Schema one asks the automata language questions (is this key
    # region empty?), importing them in the function that asks, so building a grammar stays light
    # the warm-up grammars (front-end inputs) that constrain.warmup and the vLLM processor share
    ("constrain.frontends", "constrain.warmup_grammars"),
    ("constrain.vocab",),
    ("constrain.tables", "constrain.kernels"),
    ("constrain.compiler", "constrain.compiled_file"),  # compiled grammars and their files
    (
        "constrain.matcher",
        "constrain.canonical_track",
        "constrain.token_budgets",
        "constrain.batch",
    ),
    ("constrain.bitmask",),
    ("constrain.sampling",),  # token-level samplers: logits + matchers -> tokens
    ("constrain.decoding",),  # every loop: autoregressive, speculative, SMC, ASAp, DCCD
    (
        "constrain.output",
        "constrain.tools",
        "constrain.tool_formats",
        "constrain.reasoning",
    ),  # output types; tools and their chat-template formats, reasoning
    ("constrain.diffusion",),  # the diffusion feature, its generate() route included
    ("constrain.integrations",),  # model adapters: transformers, masked LMs, vLLM
    ("constrain.request",),  # one generate/stream call prepared: options, constraint, job
    ("constrain.generation", "constrain.cli", "constrain.__main__", "constrain.warmup"),  # facades
]
KERNELS = "constrain.kernels"
# Modules outside the ladder: the testing helpers may import anything (and only the facades of
# the last stage, such as the command-line demo, may import them); the package facade is checked
# separately (it must stay lazy).
TESTING = "constrain.testing"
UNRANKED = {TESTING, "constrain"}
# The one deliberate import up the ladder: Grammar.from_regex / from_lark / from_json_schema /
# from_pydantic / builtin are the documented constructors, and each imports its front end when
# called (a deferred import; the IR itself depends on no front end).
ALLOWED_DEFERRED = {("constrain.ir.grammar", "constrain.frontends")}
# Third-party packages that only some modules may import (STYLE.md sections 4.3 and 5).
THIRD_PARTY_OWNERS = {
    "numba": (KERNELS,),
    "triton": (KERNELS,),
    "transformers": ("constrain.integrations", "constrain.generation"),
}


def _stage_index(module: str) -> int:
    return next(i for i, prefixes in enumerate(STAGES) if module in prefixes)


AUTOMATA_STAGE = _stage_index("constrain.automata")  # kernels serve this stage and later ones
TORCH_FLOOR = _stage_index("constrain.bitmask")  # torch: this stage and later, or a kernel


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def stage_of(module: str) -> int | None:
    for rank, prefixes in enumerate(STAGES):
        if any(_within(module, p) for p in prefixes):
            return rank
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    rel = ROOT / Path(*dotted.split("."))
    return (rel / "__init__.py").is_file() or rel.with_suffix(".py").is_file()


def imports_of(path: Path) -> list[tuple[str, int, str]]:
    """Return ``(imported module, line, kind)`` for every import statement in a file.

    ``kind`` is ``"runtime"`` (module level), ``"typing"`` (under ``if TYPE_CHECKING:``) or
    ``"deferred"`` (inside a function or class). ``from pkg import name`` counts as an import
    of ``pkg.name`` when that is a module of the repository, else of ``pkg``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    kinds: dict[int, str] = {id(node): "runtime" for node in tree.body}
    for node in tree.body:
        if isinstance(node, ast.If):
            guarded = ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            kinds.update({id(c): "typing" if guarded else "runtime" for c in node.body})
    out = []
    for node in ast.walk(tree):
        kind = kinds.get(id(node), "deferred")
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno, kind) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                name = sub if _within(sub, "constrain") and _is_module(sub) else base
                out.append((name, node.lineno, kind))
    return out


def _all_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_has_a_stage() -> None:
    names = [_module_name(p) for p in _all_modules()]
    missing = [n for n in names if n not in UNRANKED and stage_of(n) is None]
    assert not missing, f"assign these modules a pipeline stage in STAGES: {missing}"


def _violation(module: str, rank: int, target: str, kind: str) -> str | None:
    """Return why importing ``target`` from ``module`` (of stage ``rank``) is wrong, or None."""
    root = target.split(".")[0]
    in_kernels = _within(module, KERNELS)
    if root == "torch" and rank < TORCH_FLOOR and not in_kernels:
        return "torch belongs to the bitmask stage and later (and to kernels)"
    if root in THIRD_PARTY_OWNERS and not any(
        _within(module, owner) for owner in THIRD_PARTY_OWNERS[root]
    ):
        return f"only {', '.join(THIRD_PARTY_OWNERS[root])} may import {root}"
    if not _within(target, "constrain"):
        return None
    if target == "constrain":
        return "import from the defining module, not from the package facade"
    if target == TESTING:
        return None if rank == len(STAGES) - 1 else "only the facades may use constrain.testing"
    target_rank = stage_of(target)
    if target_rank is None:
        return f"{target} is not part of the library's stages"
    if in_kernels:
        ok = target_rank == 0 or _within(target, KERNELS)
        return None if ok else "kernels import only errors/_types/_version and other kernels"
    if _within(target, KERNELS):
        return None if rank >= AUTOMATA_STAGE else "kernels serve the automata stage and later"
    if target_rank <= rank:
        return None
    allowed = any(module == s and _within(target, d) for s, d in ALLOWED_DEFERRED)
    if kind == "deferred" and allowed:
        return None
    return f"{target} is stage {target_rank}, later than {module}"


@pytest.mark.parametrize("path", _all_modules(), ids=_module_name)
def test_imports_respect_stage_order(path: Path) -> None:
    module = _module_name(path)
    if module in UNRANKED:
        return
    rank = stage_of(module)
    assert rank is not None, f"{module} has no stage (see test_every_module_has_a_stage)"
    errors = []
    for target, line, kind in imports_of(path):
        why = _violation(module, rank, target, kind)
        if why:
            errors.append(f"{path.relative_to(ROOT)}:{line}: {kind} import of {target}: {why}")
    assert not errors, f"stage order violated in {module} (stage {rank}):\n" + "\n".join(errors)


def _rank_or_last(module: str) -> int:
    rank = stage_of(module)
    return len(STAGES) if rank is None else rank


def test_package_facade_is_lazy() -> None:
    """constrain/__init__.py imports only stages 0-1 when it runs; the rest on first access."""
    errors = [
        f"constrain/__init__.py:{line}: eager import of {target}"
        for target, line, kind in imports_of(PACKAGE / "__init__.py")
        if kind == "runtime" and _within(target, "constrain") and _rank_or_last(target) > 1
    ]
    assert not errors, "\n".join(errors)
    for name, module in getattr(constrain, "_LAZY", {}).items():
        assert name in constrain.__all__, f"_LAZY exports {name}, which is not in __all__"
        assert stage_of(module) is not None, f"_LAZY points {name} at unknown module {module}"


def test_layering_checker_catches_violations() -> None:
    """The checker itself: known-bad imports are reported, known-good ones are not."""
    assert _violation("constrain.ir.grammar", 1, "constrain.matcher", "runtime")
    assert _violation("constrain.ir.grammar", 1, "constrain.frontends.regex", "runtime")
    assert _violation("constrain.ir.grammar", 1, "constrain.frontends.regex", "deferred") is None
    assert _violation("constrain.ir.printer", 1, "constrain.frontends.regex", "deferred")
    assert _violation("constrain.automata.dfa", 2, "constrain.kernels.numba_dfa", "runtime") is None
    assert _violation("constrain.ir.nodes", 1, "constrain.kernels.numba_dfa", "runtime")
    assert _violation("constrain.sampling.masked", 9, "constrain.decoding.smc", "deferred")
    assert _violation("constrain.kernels.numba_match", 5, "constrain.matcher", "deferred")
    assert _violation("constrain.matcher", 7, "torch", "runtime")
    assert _violation("constrain.bitmask", 8, "torch", "runtime") is None
    assert _violation("constrain.compiler", 6, "numba", "runtime")
    assert _violation("constrain.vocab.vocabulary", 4, "transformers", "deferred")
    assert _violation("constrain.vocab.vocabulary", 4, "constrain", "runtime")
    assert _violation("constrain.matcher", 7, "constrain.testing", "runtime")
    assert _violation("constrain.cli", len(STAGES) - 1, "constrain.testing", "deferred") is None


# -- import cycles and private names --------------------------------------------------------


def _module_graph() -> dict[str, set[str]]:
    """Return ``{module: {constrain modules it imports when it runs}}`` (typing imports excluded).

    Deferred (function-level) imports count: a cycle closed inside a function is still a
    cycle. The one documented exception (``Grammar.from_*`` importing its front end) is left out.
    Importing ``pkg.mod`` also runs ``pkg/__init__.py``, so it counts as an import of ``pkg``.
    """
    graph: dict[str, set[str]] = {}
    for path in _all_modules():
        module = _module_name(path)
        targets: set[str] = set()
        for target, _line, kind in imports_of(path):
            if kind == "typing" or not _within(target, "constrain") or target == module:
                continue
            if any(module == m and _within(target, d) for m, d in ALLOWED_DEFERRED):
                continue
            targets.add(target)
            parts = target.split(".")
            for i in range(2, len(parts)):  # the packages on the way
                package = ".".join(parts[:i])
                if not _within(module, package):
                    targets.add(package)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    """No module of ``constrain/`` reaches itself through imports (deferred ones included)."""
    cycles = _cycles(_module_graph())
    assert not cycles, "import cycles inside constrain/:\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_private_names_across_modules() -> None:
    """A name with a leading underscore is used only inside the module that defines it."""
    errors = []
    for path in _all_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("constrain"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                private = [n for n in private if not (n.startswith("__") and n.endswith("__"))]
                if private:
                    rel = path.relative_to(ROOT)
                    errors.append(f"{rel}:{node.lineno}: from {node.module} import {private}")
    assert not errors, "private names imported across modules:\n" + "\n".join(errors)


def test_every_package_is_in_the_distribution() -> None:
    """pyproject's package list names every package of constrain/ (a wheel ships only those)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "constrain").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found | {"constrain.grammars"} == listed, sorted(
        found ^ (listed - {"constrain.grammars"})
    )
