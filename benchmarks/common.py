"""What every benchmark script shares: paths, the shared data, the peers, machine info, results.

- :data:`RESULTS_DIR` holds one current result file per benchmark, under a stable name that the
  script overwrites (:func:`result_path`); ``benchmarks/README.md`` lists them.
- :func:`data_dir` / :func:`data_file`: the shared data folder, ``$CONSTRAIN_DATA``, else
  ``../shared/data`` next to the repository root.
- :func:`import_peer`: llguidance or XGrammar, or a :class:`MissingPeerError` that says how to
  install them (``make bench``). A missing peer is an error of the run, never a silent skip.
- :func:`machine`: CPU, core count, load, Python and package versions, git commit, command line.
- :func:`write_result`: the JSON file of a run.

The scripts are run as ``python benchmarks/<script>.py``, so this folder is on ``sys.path``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
INSTALL_HINT = "install the benchmark peers with `make bench` or `pip install -e '.[bench]'`"
PEERS = ("llguidance", "xgrammar")
VERSIONS = ("constrain-llm", "torch", "numpy", "numba", "transformers", "llguidance", "xgrammar")


class MissingPeerError(RuntimeError):
    """A peer engine package is not installed (an error of the run, not a skip)."""


def log(msg: str) -> None:
    """Progress on stderr (stdout carries the report)."""
    print(msg, file=sys.stderr, flush=True)


# -- paths and data --------------------------------------------------------------------------


def result_path(name: str) -> Path:
    """The current result file of a benchmark: ``benchmarks/results/<name>.json``."""
    return RESULTS_DIR / f"{name}.json"


def shown(path: Path) -> str:
    """``path`` relative to the repository root when it lies inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def data_dir() -> Path | None:
    """The shared data folder: ``$CONSTRAIN_DATA``, else ``../shared/data`` from the root."""
    env = os.environ.get("CONSTRAIN_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "data")
    return next((c for c in candidates if c.is_dir()), None)


def data_file(name: str) -> Path:
    """A file of the shared data folder, or ``FileNotFoundError`` saying where it was sought."""
    found = data_dir()
    if found is None or not (found / name).is_file():
        raise FileNotFoundError(f"{name} not found: set CONSTRAIN_DATA or provide ../shared/data")
    return found / name


# -- peers -----------------------------------------------------------------------------------


def import_peer(name: str) -> ModuleType:
    """Import a peer engine (``llguidance``, ``xgrammar``) or raise :class:`MissingPeerError`."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingPeerError(f"{name} is not installed ({exc}); {INSTALL_HINT}") from exc


def missing_peers(names: Iterable[str]) -> list[str]:
    """The peers among ``names`` that are not installed (found without importing them)."""
    import importlib.util

    return [n for n in names if n in PEERS and importlib.util.find_spec(n) is None]


# -- machine and versions --------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def git_commit() -> str | None:
    """The checkout's ``HEAD`` (uncommitted changes are not recorded)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return proc.stdout.strip()


def git_dirty() -> bool | None:
    """Whether tracked files differ from ``HEAD`` (the commit alone does not name the code)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return bool(proc.stdout.strip())


def dist_version(name: str) -> str | None:
    """The installed version of a distribution, or ``None``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, where the OS has them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine(versions: Iterable[str] = VERSIONS) -> dict[str, Any]:
    """What a result needs to be read later: when, where, which code, which versions."""
    return {
        "timestamp_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "loadavg": loadavg(),
        "versions": {name: dist_version(name) for name in versions},
    }


def args_record(args: Any) -> dict[str, Any]:
    """An ``argparse.Namespace`` as JSON-ready values (paths as strings)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}


# -- results ---------------------------------------------------------------------------------


def write_result(path: Path, payload: dict[str, Any]) -> Path:
    """Write (overwrite) a result file: indented JSON, UTF-8, a final newline."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, ensure_ascii=False, default=str) + "\n"
    path.write_text(text, encoding="utf-8")
    return path
