"""The run report: ``pretrain report --out DIR --curated CURATED_DIR [...] --logs LOG_DIR [--checkpoint CKPT]``.

Reads each curation output's ``stats.json`` and the trainer's ``LOG_DIR/metrics.jsonl`` and writes into DIR:

- ``funnel.png``: per curated dataset (one panel each), one stacked bar per stage: documents kept plus documents
  dropped by each reason (the bar's height is the stage's input);
- ``loss.png``: training loss over steps, with validation loss where the log has it;
- ``eval.png`` (when the run evaluated ``[[eval.tasks]]``): each task metric against tokens seen;
- ``index.md``: a one-page summary linking both, with the funnel tables, the final train / validation loss,
  throughput (tokens/s, MFU; "n/a" above 100%: a CPU peak measured too low) and, with ``--checkpoint``, a
  greedy sample generated from the prompt;
- ``quarry_report.json``, written first: the mark of a report folder.

DIR must be new, empty, or an earlier report's (only the files above, with ``quarry_report.json`` or an
``index.md`` titled "# Quarry run report"): anything else is refused (``ReportError``) unless ``force``, so a
user's own files are never overwritten by mistake. Every file is written atomically.
"""
from __future__ import annotations

import math
import os
import statistics
from pathlib import Path

from curate import json_files
from curate.file_kind import file_problem

TRAIN_KEY, VAL_KEY = "loss", "val_loss"


class ReportError(ValueError):
    pass


MARKER = "quarry_report.json"
REPORT_FILES = frozenset({"index.md", "funnel.png", "loss.png", "eval.png", MARKER})
TITLE = "# Quarry run report"


def _leftover(name: str) -> bool:
    """A temporary file of an atomic write killed before its rename (``.NAME.XXXXXXXX.tmp``)."""
    return name.endswith(".tmp") and any(name.startswith(f".{f}.") for f in REPORT_FILES)


def is_report_dir(out_dir: str | Path) -> bool:
    """Whether ``out_dir`` is a folder `pretrain report` wrote: only the files it writes (and temporary files of
    its atomic writes), with its ``quarry_report.json`` or an ``index.md`` under its title (a report written before
    the marker was)."""
    from curate.shards import read_record

    out = Path(out_dir)
    try:
        names = {p.name for p in out.iterdir()}
    except OSError:
        return False
    if not names or not all(n in REPORT_FILES or _leftover(n) for n in names):
        return False
    marker = read_record(out / MARKER)
    if marker is not None and marker.get("written_by") == "pretrain report":
        return True
    try:
        return json_files.read_bytes(out / "index.md", 1 << 20).decode("utf-8").startswith(TITLE + "\n")
    except (OSError, ValueError):
        return False


def check_out_dir(out_dir: str | Path, force: bool = False) -> None:
    """ReportError when ``out_dir`` cannot be the report folder: a file (or below one), or (unless ``force``) a
    folder that holds anything but an earlier report (:func:`is_report_dir`)."""
    from curate.write_guard import blocking_file

    out = Path(out_dir)
    above = blocking_file(out)
    if above:
        raise ReportError(f"{out} is a file, not a folder: choose another --out" if above == os.path.abspath(out)
                          else f"{out} lies below {above}, which is a file, not a folder: choose another --out")
    for name in REPORT_FILES:
        if (out / name).is_dir():
            raise ReportError(f"{out / name} is a folder, where the report writes a file: choose another --out")
    if force or not out.exists() or not any(out.iterdir()) or is_report_dir(out):
        return
    names = sorted(p.name for p in out.iterdir())
    other = [n for n in names if n not in REPORT_FILES and not _leftover(n)] or names
    raise ReportError(f"{out} is not empty and is not an earlier report (it holds {', '.join(other[:5])}"
                      f"{' and more' if len(other) > 5 else ''}); choose a new or empty folder, or pass --force "
                      f"to write the report's files into it (files of the same names are replaced)")


def _save_figure(fig, path: Path, **kwargs) -> None:
    """``fig.savefig(path)`` atomically (a temporary file beside it, renamed onto it)."""
    from curate.shards import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", **kwargs)


def _write_text(path: Path, text: str) -> None:
    from curate.shards import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def read_stats(curated_dir: str | Path) -> dict:
    path = Path(curated_dir) / "stats.json"
    if not path.is_file():
        raise ReportError(f"{path} {file_problem(path)}: is {curated_dir} a finished `curate run` output?")
    try:
        stats = json_files.read_json(path)
    except ValueError as e:
        raise ReportError(f"{path} is not JSON ({e}): rerun `curate run` on {curated_dir} to rewrite it") from e
    if not isinstance(stats, dict) or not isinstance(stats.get("stages"), list) or not stats["stages"]:
        raise ReportError(f"{path}: no 'stages' list")
    for s in stats["stages"]:
        if not isinstance(s, dict):
            raise ReportError(f"{path}: a stage entry is {s!r}, not an object")
        for key in ("name", "in", "kept", "dropped"):
            if key not in s:
                raise ReportError(f"{path}: stage {s.get('name', '?')!r} has no {key!r}")
    stats.setdefault("pipeline", Path(curated_dir).name)
    return stats


def read_metrics(log_dir: str | Path) -> list[dict]:
    path = Path(log_dir) / "metrics.jsonl"
    if not path.is_file():
        raise ReportError(f"{path} {file_problem(path)}: is {log_dir} the trainer's log.dir?")
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ReportError(f"{path}: not text (byte {e.start} is not UTF-8): is {log_dir} the trainer's log.dir?") \
            from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json_files.loads(line, f"{path}:{n}")
        except ValueError as e:
            if n == len(lines):  # a last line cut short by a killed run
                break
            raise ReportError(str(e)) from None
        step = row.get("step", 0) if isinstance(row, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise ReportError(f"{path}:{n}: not a metrics entry (an object whose 'step' is an integer): {line[:80]!r}")
        rows.append(row)
    return rows


def _series(rows: list[dict], key: str) -> list[tuple[int, float]]:
    out = {}
    for r in rows:
        v = r.get(key)
        if "step" in r and isinstance(v, (int, float)) and math.isfinite(v):
            out[int(r["step"])] = float(v)  # a resumed run may log a step again: keep the last
    return sorted(out.items())


def summarize_metrics(rows: list[dict]) -> dict:
    train, val = _series(rows, TRAIN_KEY), _series(rows, VAL_KEY)
    tps, mfu = _series(rows, "tokens_per_s"), _series(rows, "mfu")
    # throughput: median over the steps after the first (which pays for start-up and compilation)
    steady = [v for _, v in tps[1:]] or [v for _, v in tps]
    steady_mfu = [v for _, v in mfu[1:]] or [v for _, v in mfu]
    return {
        "steps": train[-1][0] if train else None,
        "train_loss": train[-1][1] if train else None,
        "first_train_loss": train[0][1] if train else None,
        "val_loss": val[-1][1] if val else None,
        "val_step": val[-1][0] if val else None,
        "tokens_per_s": statistics.median(steady) if steady else None,
        "mfu": statistics.median(steady_mfu) if steady_mfu else None,
        "train": train, "val": val,
    }


def eval_series(rows: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """In-training evaluation ({"eval/NAME/METRIC": ...} rows) -> {"NAME/METRIC": [(tokens seen, value)]}, the last
    row of a step winning (a resumed run may evaluate a step again)."""
    by_step: dict[str, dict[int, tuple[int, float]]] = {}
    for r in rows:
        tokens = r.get("tokens")
        if not isinstance(tokens, (int, float)):
            continue
        for k, v in r.items():
            if k.startswith("eval/") and isinstance(v, (int, float)) and math.isfinite(v):
                by_step.setdefault(k[5:], {})[int(r["step"])] = (int(tokens), float(v))
    return {k: [pair for _, pair in sorted(steps.items())] for k, steps in by_step.items()}


def plot_eval(series: dict[str, list[tuple[int, float]]], path: Path) -> None:
    """One panel per task metric against tokens seen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    n = len(series)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False, layout="constrained")
    for ax, (name, points) in zip(axes.flat, sorted(series.items())):
        ax.plot(*zip(*points), "o-", lw=1.2, ms=3)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("tokens seen")
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 200k, 1.2M: no overlapping labels
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    _save_figure(fig, path, dpi=100)
    plt.close(fig)


KEPT_COLOUR = "#3d7f4b"
HATCHES = ("", "//", "..", "xx")  # a second, third... pass over the palette when reasons outnumber its colours


def reason_colours(datasets: list[dict]) -> dict[str, tuple]:
    """One (colour, hatch) per drop reason, the same in every panel: reasons in order of first appearance (by
    dataset, then stage), colours from tab20 (the dark ones first), tab20b and tab20c without the greens of "kept"."""
    import matplotlib

    tab20 = matplotlib.colormaps["tab20"].colors
    palette = [*tab20[0::2], *tab20[1::2], *matplotlib.colormaps["tab20b"].colors,
               *matplotlib.colormaps["tab20c"].colors]
    palette = [c for c in palette if not (c[1] > c[0] + 0.1 and c[1] > c[2] + 0.1)]  # no green
    reasons = list(dict.fromkeys(r for stats in datasets for s in stats["stages"] for r, n in s["dropped"].items()
                                 if n))
    return {r: (palette[k % len(palette)], HATCHES[(k // len(palette)) % len(HATCHES)])
            for k, r in enumerate(reasons)}


def plot_funnel(datasets: list[dict], path: Path) -> None:
    """One panel per dataset, one stacked bar per stage (kept + dropped by reason), one legend for all panels
    outside them, each reason one colour everywhere."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colours = reason_colours(datasets)
    n = len(datasets)
    fig, axes = plt.subplots(n, 1, figsize=(10, 3.8 * n), squeeze=False, layout="constrained")
    for ax, stats in zip(axes[:, 0], datasets):
        stages = stats["stages"]
        x = range(len(stages))
        ax.bar(x, [s["kept"] for s in stages], color=KEPT_COLOUR)
        for i, s in enumerate(stages):
            bottom = s["kept"]
            for reason, count in sorted(s["dropped"].items()):
                if count:
                    colour, hatch = colours[reason]
                    ax.bar([i], [count], bottom=[bottom], color=colour, hatch=hatch, edgecolor="white", lw=0.3)
                    bottom += count
        ax.set_xticks(list(x), [s["name"] for s in stages], rotation=35, ha="right", rotation_mode="anchor")
        ax.set_ylabel("documents")
        ax.set_title(f"{stats['pipeline']}: {stages[0]['in']:,} in -> {stages[-1]['kept']:,} kept")
    handles = [Patch(color=KEPT_COLOUR, label="kept")]
    handles += [Patch(facecolor=c, hatch=h, edgecolor="white", label=f"dropped: {r}") for r, (c, h) in colours.items()]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, ncols=1 + len(handles) // 30,
               title="documents")
    _save_figure(fig, path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def plot_loss(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    if summary["train"]:
        ax.plot(*zip(*summary["train"]), label="train loss", lw=1.2)
    if summary["val"]:
        ax.plot(*zip(*summary["val"]), "o-", label="validation loss", lw=1.2, ms=4)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _save_figure(fig, path, dpi=100)
    plt.close(fig)


def _fmt(v, spec=".4f") -> str:
    return "-" if v is None else format(v, spec)


def mfu_text(mfu: float | None) -> str:
    """MFU as a percentage; above 100% it is no utilisation (the peak, a matmul timed on a busy CPU, was too
    low): n/a, with the reason."""
    if mfu is None:
        return "-"
    if mfu > 1:
        return f"n/a (the steps ran {mfu:.2f}x the measured matmul peak: the peak was measured while the machine " \
               "was busier; set train.peak_tflops for a meaningful figure)"
    return f"{100 * mfu:.2f}%"


def funnel_table(stats: dict) -> str:
    lines = ["| stage | in | kept | dropped | kept % | reasons |", "|---|---:|---:|---:|---:|---|"]
    for s in stats["stages"]:
        dropped = sum(s["dropped"].values())
        pct = f"{100 * s['kept'] / s['in']:.1f}" if s["in"] else "-"
        reasons = ", ".join(f"{r}: {n:,}" for r, n in sorted(s["dropped"].items(), key=lambda kv: -kv[1]))
        lines.append(f"| {s['name']} | {s['in']:,} | {s['kept']:,} | {dropped:,} | {pct} | {reasons} |")
    return "\n".join(lines)


def eval_section(series: dict) -> list[str]:
    if not series:
        return []
    md = ["## Evaluation during training", "", "![eval](eval.png)", "", "| task/metric | first | last | tokens seen |",
          "|---|---:|---:|---:|"]
    for name, points in sorted(series.items()):
        md.append(f"| {name} | {points[0][1]:.4f} | {points[-1][1]:.4f} | {points[-1][0]:,} |")
    return md + [""]


def write_index(out: Path, datasets: list[tuple[str, dict]], summary: dict, sample: tuple[str, str] | None,
                evals: dict | None = None) -> None:
    md = [TITLE, ""]
    md += ["## Curation funnel", "", "![funnel](funnel.png)", ""]
    for where, stats in datasets:
        first, last = stats["stages"][0], stats["stages"][-1]
        md += [f"### {stats['pipeline']} (`{where}`)", "",
               f"{first['in']:,} documents in, {last['kept']:,} kept "
               f"({100 * last['kept'] / max(first['in'], 1):.1f}%).", "", funnel_table(stats), ""]
    md += ["## Training", "", "![loss](loss.png)", "",
           "| | |", "|---|---|",
           f"| steps | {summary['steps'] if summary['steps'] is not None else '-'} |",
           f"| first train loss | {_fmt(summary['first_train_loss'])} |",
           f"| final train loss | {_fmt(summary['train_loss'])} |",
           f"| final validation loss | {_fmt(summary['val_loss'])}"
           + (f" (step {summary['val_step']})" if summary["val_step"] is not None else "") + " |",
           f"| tokens/s (median) | {_fmt(summary['tokens_per_s'], ',.0f')} |",
           f"| MFU (median) | {mfu_text(summary['mfu'])} |", ""]
    md += eval_section(evals or {})
    if sample is not None:
        prompt, text = sample
        md += ["## Sample", "", f"Greedy continuation of {prompt!r}:", "", "```text", prompt + text, "```", ""]
    _write_text(out / "index.md", "\n".join(md))


def make_report(out_dir: str | Path, curated: list[str | Path], log_dir: str | Path,
                sample: tuple[str, str] | None = None, force: bool = False) -> Path:
    """Write the report into ``out_dir`` (new, empty, or an earlier report's; any folder with ``force``:
    :func:`check_out_dir`), its marker first, ``index.md`` last."""
    out = Path(out_dir)
    check_out_dir(out, force)
    earlier = out.is_dir() and is_report_dir(out)
    datasets = [(str(c), read_stats(c)) for c in curated]
    rows = read_metrics(log_dir)
    summary = summarize_metrics(rows)
    evals = eval_series(rows)
    if not summary["train"]:
        raise ReportError(f"{Path(log_dir) / 'metrics.jsonl'} has no entry with step and {TRAIN_KEY!r}")
    out.mkdir(parents=True, exist_ok=True)
    from curate.shards import write_json

    write_json({"written_by": "pretrain report", "curated": [str(c) for c in curated], "logs": str(log_dir)},
               out / MARKER)
    plot_funnel([s for _, s in datasets], out / "funnel.png")
    plot_loss(summary, out / "loss.png")
    if evals:
        plot_eval(evals, out / "eval.png")
    elif earlier and (out / "eval.png").is_file():  # an earlier report's plot: this one has no evaluation
        (out / "eval.png").unlink()
    write_index(out, datasets, summary, sample, evals)
    return out
