"""Draw one PNG per benchmark from the current result files into ``docs/img/``.

Reads ``benchmarks/results/<name>.json`` (the files the benchmark scripts overwrite) and writes
``docs/img/<name>.png``; a result file that is missing is skipped with a note. Needs matplotlib
(``pip install matplotlib``).

    .venv/bin/python benchmarks/plots.py                 # every plot
    .venv/bin/python benchmarks/plots.py engine maskbench-2000 --out /tmp/plots
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import ROOT, log, result_path, shown

IMG_DIR = ROOT / "docs" / "img"
ENGINE_COLOURS = {"constrain": "#1f77b4", "llguidance": "#ff7f0e", "xgrammar": "#2ca02c"}
ENGINE_LABELS = {"constrain": "constrain", "llguidance": "llguidance", "xgrammar": "XGrammar"}


def _load(name: str) -> dict[str, Any] | None:
    path = result_path(name)
    if not path.is_file():
        log(f"skip {name}: {shown(path)} not found")
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _bars(ax: Any, groups: Sequence[str], series: dict[str, Sequence[float | None]]) -> None:
    """Grouped bars: one group per label in ``groups``, one bar per engine in ``series``."""
    width = 0.8 / max(len(series), 1)
    for k, (engine, values) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ys = [v if v is not None else 0.0 for v in values]
        bars = ax.bar(
            xs,
            ys,
            width,
            label=ENGINE_LABELS.get(engine, engine),
            color=ENGINE_COLOURS.get(engine),
        )
        for bar, v in zip(bars, values, strict=True):
            if v is not None:
                text = f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
                ax.annotate(
                    text,
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    rotation=90,
                    xytext=(0, 2),
                    textcoords="offset points",
                )
    ax.set_xticks(range(len(groups)), groups)


def _engine_names(items: Sequence[dict[str, Any]], key: str = "engine") -> list[str]:
    return list(dict.fromkeys(item[key] for item in items))


# -- one function per result file ------------------------------------------------------------


def plot_engine(plt: Any, data: dict[str, Any]) -> Any:
    """Per-token mean / p50 / p99 per workload and engine (log scale)."""
    results = [r for r in data["results"] if r.get("status") == "ok" or r.get("per_token_us")]
    workloads = _engine_names(results, "workload")
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 4.2))
    axes = [axes] if len(workloads) == 1 else list(axes)
    for ax, workload in zip(axes, workloads, strict=True):
        rows = [r for r in results if r["workload"] == workload]
        series = {
            r["engine"]: [(r.get("per_token_us") or {}).get(s) for s in ("mean", "p50", "p99")]
            for r in rows
        }
        _bars(ax, ["mean", "p50", "p99"], series)
        ax.set_yscale("log")
        ax.set_ylim(top=ax.get_ylim()[1] * 8)
        truncated = [ENGINE_LABELS[r["engine"]] for r in rows if r.get("truncated")]
        note = f"\n({', '.join(truncated)}: stopped at the time budget)" if truncated else ""
        ax.set_title(f"{workload} ({rows[0]['n_tokens']:,} tokens){note}", fontsize=10)
        ax.set_ylabel("time per token, fill + accept (µs, log)")
        ax.grid(axis="y", which="major", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("Per-token mask time, Llama 3.2 tokenizer, one thread (lower is better)")
    return fig


def _plot_maskbench(plt: Any, data: dict[str, Any]) -> Any:
    engines = data["engines"]
    names = [e["engine"] for e in engines]
    fig, (ax_pass, ax_ttfm, ax_tbm) = plt.subplots(
        1, 3, figsize=(14, 4.4), gridspec_kw={"width_ratios": [1, 1.6, 1.6]}
    )
    passing = [e["counts"]["passing"] for e in engines]
    bars = ax_pass.bar(
        [ENGINE_LABELS[n] for n in names], passing, color=[ENGINE_COLOURS[n] for n in names]
    )
    for bar, e in zip(bars, engines, strict=True):
        bad = e["counts"]["invalidation_error"]
        ax_pass.annotate(
            f"{bar.get_height():,.0f}\n{bad} invalid\naccepted",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=7,
        )
    ax_pass.set_ylim(0, data["n_schemas"] * 1.25)
    ax_pass.set_ylabel(f"schemas passing (of {data['n_schemas']:,})")
    ax_pass.set_title("coverage and soundness", fontsize=10)
    pcts = ["p25", "p50", "p75", "p90", "p99"]
    for ax, key, unit, title in (
        (ax_ttfm, "ttfm_ms", "ms", "TTFM: compile + first mask"),
        (ax_tbm, "tbm_us", "µs", "TBM: time per token, fill + accept"),
    ):
        _bars(
            ax,
            pcts + ["mean"],
            {e["engine"]: [e[key].get(p) for p in pcts + ["mean"]] for e in engines},
        )
        ax.set_yscale("log")
        ax.set_ylim(top=ax.get_ylim()[1] * 8)
        ax.set_ylabel(f"{unit} (log)")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    ax_tbm.legend(fontsize=8, loc="upper left")
    what = "every schema" if data["args"].get("all") else f"seeded sample of {data['n_schemas']:,}"
    fig.suptitle(
        f"MaskBench, {what} (flexible whitespace, Llama 3.2 tokens; times: lower is better)"
    )
    return fig


def plot_generate(plt: Any, data: dict[str, Any]) -> Any:
    """Tokens/s per configuration of ``bench_generate.py`` (batch 1)."""
    rows = data["summary"]["1"]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    labels = [r["config"] for r in rows]
    colours = [
        ENGINE_COLOURS.get(r["config"].split("+")[-1].split("/")[0], "#999999") for r in rows
    ]
    bars = ax.barh(labels, [r["tok_s"] for r in rows], color=colours)
    for bar, r in zip(bars, rows, strict=True):
        extra = f"  ratio {r['ratio']:.3f}" if r.get("ratio") else ""
        ax.annotate(
            f" {r['tok_s']:.2f} tok/s{extra}",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            va="center",
            fontsize=8,
        )
    ax.invert_yaxis()
    ax.set_xlim(0, max(r["tok_s"] for r in rows) * 1.45)
    ax.set_xlabel("tokens per second (SmolLM2-135M, CPU, batch 1; higher is better)")
    ax.set_title("Constrained vs unconstrained generation (ratio: to the matching unconstrained)")
    return fig


def plot_speculative(plt: Any, data: dict[str, Any]) -> Any:
    """Tokens/s and speed-up of each drafter configuration."""
    summary = data["summary"]
    names = list(summary)
    fig, ax = plt.subplots(figsize=(8, 4))
    bars = ax.bar(names, [summary[n]["tokens_per_second"] for n in names], color="#1f77b4")
    for bar, n in zip(bars, names, strict=True):
        ax.annotate(
            f"{summary[n]['speedup_total']:.2f}x\n"
            f"{summary[n]['forwards_per_token']:.2f} passes/tok",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylim(0, max(summary[n]["tokens_per_second"] for n in names) * 1.3)
    ax.set_ylabel("tokens per second (higher is better)")
    ax.set_title(
        f"Speculative decoding, {data['examples']} extraction examples, greedy, SmolLM2-135M, CPU"
    )
    return fig


def plot_vllm(plt: Any, data: dict[str, Any]) -> Any:
    """Requests/s per round and its median, per vLLM configuration."""
    results = data["results"]
    names = list(results)
    fig, ax = plt.subplots(figsize=(8, 4))
    colours = [ENGINE_COLOURS.get(n, ENGINE_COLOURS.get("llguidance" if n == "guidance" else ""))
               for n in names]  # fmt: skip
    medians = [results[n]["requests_per_s"] for n in names]
    bars = ax.bar(names, medians, color=[c or "#999999" for c in colours], alpha=0.8)
    for i, n in enumerate(names):
        rounds = results[n].get("requests_per_s_rounds", [])
        ax.plot([i] * len(rounds), rounds, "k.", markersize=6)
        valid = results[n].get("valid_share", 0.0)
        ax.annotate(
            f"{medians[i]:.3f}\n{valid:.0%} valid",
            (bars[i].get_x() + bars[i].get_width() / 2, max([medians[i], *rounds])),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylim(0, max(medians) * 1.3)
    ax.set_ylabel("requests per second (bar: median; dots: rounds)")
    ax.set_title(
        f"vLLM ({data['vllm']}, CPU), {data['num_requests']} JSON-Schema requests, SmolLM2-135M"
    )
    return fig


def plot_sampling(plt: Any, data: dict[str, Any]) -> Any:
    """Field accuracy and validity of each sampling method on the extraction set."""
    methods = {m: v["summary"] for m, v in data["methods"].items() if "summary" in v}
    names = list(methods)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.38
    xs = range(len(names))
    ax.bar([x - width / 2 for x in xs], [methods[m]["field_accuracy"] for m in names], width,
           label="field accuracy", color="#1f77b4")  # fmt: skip
    ax.bar([x + width / 2 for x in xs], [methods[m]["validity"] for m in names], width,
           label="validity", color="#aec7e8")  # fmt: skip
    ax.set_xticks(list(xs), names)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("share of examples / fields")
    ax.legend(fontsize=8)
    ax.set_title(f"Sampling methods, {data['meta']['examples']} extraction examples, SmolLM2-135M")
    return fig


def plot_diffusion(plt: Any, data: dict[str, Any]) -> Any:
    """Grammar work per denoising step, per task and method, against one SmolLM2 step."""
    rows = [r for r in data["rows"] if "constraint_ms" in r and r["method"] != "none"]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    series = {
        m: [
            next((r["constraint_ms"] for r in rows if r["task"] == t and r["method"] == m), None)
            for t in tasks
        ]
        for m in methods
    }
    _bars(ax, tasks, series)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.25)
    ax.set_ylabel("grammar work per step (ms)")
    ax.legend(fontsize=8)
    ref = data.get("reference_forward_ms") or []
    note = f"; one SmolLM2-135M step: {min(ref):.0f}-{max(ref):.0f} ms" if ref else ""
    ax.set_title(f"Diffusion decoding, shipped tiny model{note}", fontsize=10)
    return fig


def plot_json_schema_suite(plt: Any, data: dict[str, Any]) -> Any:
    """Status shares per case set of the JSON-Schema-Test-Suite."""
    sets = data["sets"]
    statuses = ["pass", "false_negative", "compile_error", "limit", "unsupported", "false_positive"]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    left = [0.0] * len(sets)
    for status in statuses:
        shares = [sets[s].get(status, 0) / max(sum(sets[s].values()), 1) for s in sets]
        ax.barh(list(sets), shares, left=left, label=status)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    for i, s in enumerate(sets):
        total = sum(sets[s].values())
        ax.annotate(f" {sets[s].get('pass', 0) / total:.1%} pass", (0, i), va="center", fontsize=8,
                    color="white")  # fmt: skip
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("share of the set's cases")
    ax.legend(fontsize=7, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return fig


def plot_scaling(plt: Any, data: dict[str, Any]) -> Any:
    """Time to first mask against N, one panel per row (log-log); a refusal or timeout ends a
    line, marked with an x."""
    rows = list(data["results"])
    cols = 4
    fig, axes = plt.subplots(
        (len(rows) + cols - 1) // cols, cols, figsize=(4.0 * cols, 3.3 * ((len(rows) + 3) // 4))
    )
    flat = list(axes.flat) if hasattr(axes, "flat") else [axes]
    for ax, row in zip(flat, rows, strict=False):
        for engine, recs in data["results"][row].items():
            ok = [r for r in recs if r.get("status") == "ok"]
            colour = ENGINE_COLOURS.get(engine)
            ax.plot(
                [r["n"] for r in ok],
                [r["ttfm_ms"] for r in ok],
                marker="o",
                markersize=3,
                color=colour,
                label=ENGINE_LABELS.get(engine, engine),
            )
            failed = [r for r in recs if r.get("status") != "ok"]
            if failed and ok:
                ax.plot([failed[0]["n"]], [ok[-1]["ttfm_ms"]], marker="x", color=colour, ms=8)
        ax.set_xscale("log", base=4)
        ax.set_yscale("log")
        ax.set_title(data["rows"].get(row, row), fontsize=8)
        ax.set_xlabel("N", fontsize=8)
        ax.set_ylabel("time to first mask (ms)", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in flat[len(rows) :]:
        ax.axis("off")
    flat[0].legend(fontsize=7)
    fig.suptitle("Time to first mask as the number in a schema grows (x: refused or timed out)")
    return fig


PLOTS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "engine": plot_engine,
    "maskbench-2000": _plot_maskbench,
    "maskbench-300": _plot_maskbench,
    "generate": plot_generate,
    "speculative": plot_speculative,
    "vllm": plot_vllm,
    "sampling": plot_sampling,
    "diffusion": plot_diffusion,
    "json-schema-suite": plot_json_schema_suite,
    "scaling": plot_scaling,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"plots to draw (default: {', '.join(PLOTS)})")
    parser.add_argument("--out", type=Path, default=IMG_DIR, help="folder (default docs/img)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(PLOTS))
    if unknown:
        parser.error(f"unknown plots {unknown}; choose from {', '.join(PLOTS)}")
    try:
        import matplotlib
    except ImportError:
        log("error: matplotlib is not installed (pip install matplotlib)")
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(PLOTS):
        data = _load(name)
        if data is None:
            continue
        fig = PLOTS[name](plt, data)
        fig.tight_layout()
        path = args.out / f"{name}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        log(f"wrote {shown(path)} ({path.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
