"""What an ablation shows a reader: the results table (printed, and in ``DIR/report.md``) and one PNG per metric
(``DIR/curves/TASK_METRIC.png``): the metric against tokens seen, one line per variant (the mean over its seeds)
with a band from the lowest to the highest seed, read from each run's ``metrics.jsonl`` eval rows."""
from __future__ import annotations

import math
from pathlib import Path

from pretrain.ablate.runs import Run, eval_rows


def _num(x, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def table(results: dict) -> str:
    """One markdown table: per metric and variant, mean ± std over seeds, the difference from the baseline,
    its standard error and the verdict."""
    comps = {(c["variant"], c["metric"]): c for c in results["comparisons"]}
    lines = ["| metric | variant | mean ± std | per seed | delta vs " + results["baseline"] + " | stderr | verdict |",
             "|---|---|---|---|---|---|---|"]
    metrics = list(results["variants"][0]["mean"]) if results["variants"] else []
    for m in metrics:
        for v in results["variants"]:
            if m not in v["mean"]:
                continue
            c = comps.get((v["name"], m))
            seeds = " ".join(_num(r["metrics"].get(m)) for r in v["runs"])
            lines.append(f"| {m} | {v['name']} | {_num(v['mean'][m])} ± {_num(v['std'][m], 2)} | {seeds} | "
                         + (f"{_num(c['delta'], 3)} | {_num(c['stderr'], 2)} | **{c['verdict']}** |" if c
                            else "(baseline) | | |"))
    return "\n".join(lines)


def snr_line(results: dict) -> str:
    return "signal-to-noise (spread of variant means / seed std): " + ", ".join(
        f"{m} {_num(r, 3)}" for m, r in results["snr"].items())


def curves(runs: list[Run], out: Path) -> list[Path]:
    """One PNG per metric; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    series: dict[str, dict[str, list[dict[int, tuple[int, float]]]]] = {}
    for run in runs:
        rows = eval_rows(Path(run.dir) / "logs")
        for key in {k for r in rows for k in r if k.startswith("eval/")}:
            points = {r["step"]: (r.get("tokens", r["step"]), r[key]) for r in rows if key in r}
            series.setdefault(key[len("eval/"):], {}).setdefault(run.variant, []).append(points)
    folder = out / "curves"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for metric, by_variant in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(6, 4))
        for variant, per_seed in by_variant.items():
            steps = sorted(set.intersection(*(set(p) for p in per_seed)))
            if not steps:
                continue
            x = [per_seed[0][s][0] for s in steps]
            y = np.array([[p[s][1] for s in steps] for p in per_seed], dtype=float)
            line, = ax.plot(x, y.mean(axis=0), marker="o", markersize=3, label=f"{variant} ({len(per_seed)} seeds)")
            if len(per_seed) > 1:
                ax.fill_between(x, y.min(axis=0), y.max(axis=0), color=line.get_color(), alpha=0.2)
        ax.set_xlabel("tokens seen")
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} (band: lowest to highest seed)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = folder / (metric.replace("/", "_") + ".png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def write_report(results: dict, runs: list[Run], out: Path) -> Path:
    """``DIR/report.md``: the table, the signal-to-noise ratios, contamination and the curves."""
    pngs = curves(runs, out)
    lines = [f"# Ablation: {', '.join(v['name'] for v in results['variants'])} (baseline {results['baseline']})", "",
             f"{results['tokens']:,} tokens per run requested ({runs[0].tokens:,} trained, {runs[0].steps} steps), "
             f"seeds {results['seeds']}.", "", table(results), "", snr_line(results), "", f"Rule: {results['rule']}.",
             ""]
    if results.get("contamination"):
        lines += ["## Contamination (evaluation items found in the training data)", "",
                  "| variant | items found | share |", "|---|---|---|"]
        lines += [f"| {name} | {c['found']} / {c['items']} | {c['share']:.1%} |"
                  for name, c in results["contamination"].items()]
        lines.append("")
    if pngs:
        lines += ["## Curves", ""] + [f"![{p.stem}](curves/{p.name})" for p in pngs] + [""]
    path = out / "report.md"
    from pretrain.ablate.runs import write_text

    write_text(path, "\n".join(lines))
    return path
