"""`curate stats OUT`: the funnel of a finished run: per stage, documents in, added (pieces of split documents,
shown when a stage split any), kept, dropped by reason."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from curate import json_files

EPILOG = """examples (after `make demo`):
  curate stats out/demo/curated/web
  curate stats out/demo/curated/web --json
"""

def add_arguments(p) -> None:
    p.epilog, p.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    p.add_argument("output", help="a curation output folder (holding stats.json)")
    p.add_argument("--json", action="store_true", help="print stats.json as it is")


def run(args) -> int:
    path = Path(args.output) / "stats.json"
    if not path.is_file():
        print(f"curate: error: {path} not found; is {args.output} a finished curate run?", file=sys.stderr)
        return 2
    try:
        stats = json_files.read_json(path)
        text = json.dumps(stats, indent=2) if args.json else format_funnel(stats)
    except (ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError) as e:  # damaged or not ours
        print(f"curate: error: {path} is not a curate run's stats ({type(e).__name__}: {e}); rerun `curate run` "
              "on that output folder to rewrite it", file=sys.stderr)
        return 2
    print(text)
    return 0


def format_funnel(stats: dict) -> str:
    """The funnel table and its notes. A stage that splits documents (``decontaminate``) adds rows: an ``added``
    column then shows them, ``kept %`` is of ``in + added`` (what the stage had to keep or set aside: never over
    100), and the last line names the pieces added, so a split never reads as more documents than went in."""
    splits = any(s.get("added") for s in stats["stages"])
    head = ("stage", "in") + (("added",) if splits else ()) + ("kept", "dropped", "kept %")
    rows = [head + ("reasons",)]
    for s in stats["stages"]:
        dropped = sum(s["dropped"].values())
        added = int(s.get("added") or 0)
        whole = s["in"] + added
        pct = f"{100 * s['kept'] / whole:.1f}" if whole else "-"
        reasons = ", ".join(f"{r}={n}" for r, n in sorted(s["dropped"].items(), key=lambda kv: -kv[1]))
        if s.get("skipped"):
            reasons += (" | " if reasons else "") + "skipped records: " + ", ".join(
                f"{k}={n}" for k, n in sorted(s["skipped"].items(), key=lambda kv: -kv[1]))
        cells = (s["name"], f"{s['in']:,}") + ((f"{added:,}",) if splits else ()) + (f"{s['kept']:,}", f"{dropped:,}", pct)
        rows.append(cells + (reasons,))
    n = len(head)
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    lines = []
    for j, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, n)] + [r[n]]
        lines.append("  ".join(cells).rstrip())
        if j == 0:
            lines.append("-" * len(lines[0]))
    for s in stats["stages"]:
        notes = _plan_notes(s.get("plan") or {})
        if notes:
            lines.append(f"{s['name']}: {notes}")
        if s.get("counters"):
            lines.append(f"{s['name']}: " + ", ".join(f"{k.replace('_', ' ')} {n:,}" for k, n in sorted(s["counters"].items())))
        if s.get("errors"):  # documents a stage raised on, set aside as stage_error
            top = sorted(s["errors"].items(), key=lambda kv: -kv[1])[:3]
            lines.append(f"{s['name']}: stage errors: " + "; ".join(f"{msg} (x{n:,})" for msg, n in top))
    first, last = stats["stages"][0], stats["stages"][-1]
    added = sum(int(s.get("added") or 0) for s in stats["stages"])
    if added:  # kept of (documents read + pieces made by splits): what the run had to keep or set aside
        lines.append(f"{first['in']:,} input documents + {added:,} pieces added by splits -> {last['kept']:,} kept "
                     f"({100 * last['kept'] / max(first['in'] + added, 1):.1f}%)")
    else:
        lines.append(f"{first['in']:,} input documents -> {last['kept']:,} kept "
                     f"({100 * last['kept'] / max(first['in'], 1):.1f}%)")
    return "\n".join(lines)


# Plan figures worth a line under the table (the MT-NLG paper reported decontamination this way).
_PLAN_KEYS = ("documents_split", "documents_trimmed", "documents_removed", "clusters", "duplicates", "candidate_pairs")


def _plan_notes(plan: dict) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {plan[k]:,}" for k in _PLAN_KEYS if isinstance(plan.get(k), int))
