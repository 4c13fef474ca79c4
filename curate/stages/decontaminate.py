"""``decontaminate``: cut evaluation-set n-grams out of the training text, with the MT-NLG rules.

Pipeline keys::

    [[stages]]
    type = "decontaminate"
    eval_files = ["evals/lambada.jsonl", "evals/squad.txt"]   # JSONL (.jsonl, .json, .gz) or text
    ngram = 13          # n-gram length (GPT-3 / MT-NLG)
    min_ngram = 8       # an example of min_ngram..ngram-1 words is itself one n-gram ("short tasks")
    eval_fields = []    # JSONL keys holding eval text; [] = "text" if present, else every string value
    window = 200        # characters removed on each side of a matched n-gram
    min_fragment = 200  # fragments shorter than this are dropped
    max_splits = 10     # a document left in more than this many fragments is removed

The index: every example of every eval file (a JSONL record's fields, or a non-empty line of a text
file) is normalized into words exactly as ``minhash_dedup`` does (lowercase, punctuation removed,
digits folded to 0, whitespace collapsed; see ``curate.stages.minhash.shingles``). An example of at
least ``ngram`` words contributes all its ``ngram``-grams; one of ``min_ngram`` to ``ngram - 1``
words contributes itself whole; shorter ones nothing (Megatron-LM ``filter_ngrams.py`` does the
same). n-grams are kept as 64-bit hashes, sorted, in ``plan_dir/ngrams.npy``.

The scan (one task per shard, compiled): every run of n words of a document (for every n in the
index) is looked up. Each match removes the matched span plus ``window`` characters on each side
of it, in the original text; overlapping cuts merge. The pieces left, stripped of surrounding
whitespace, are kept if they have at least ``min_fragment`` characters. The outcome per document:

- no match: untouched (the row passes through byte for byte);
- **trimmed**: one piece left (the cut touched the start or the end, or the rest was too short);
- **split**: two to ``max_splits`` pieces left; they stay one document (same id), joined by a blank
  line, so every input row is still one output row and the run's counts add up;
- **removed**: no piece left, or more than ``max_splits`` pieces: set aside with reason
  ``contaminated``.

The plan returns (and the runner puts in ``stats.json`` under this stage's ``plan``) the MT-NLG
report: ``documents_split``, ``documents_trimmed``, ``documents_removed`` (and of those
``removed_split_over_limit``), plus matches and characters removed. Per-shard outcomes are in
``plan_dir/results/NNNNN.arrow`` (row, outcome, matches, pieces, new text).
"""
from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.schema import TEXT
from curate.shards import claim_plan_dir, read_json, read_shard, write_json, write_shard
from curate.stages.base import GlobalStage, StageResult, split
from curate.stages.minhash.kernels import _example_ngrams, _match_kernel
from curate.stages.minhash.shingles import words
from curate.stages.minhash.store import load_npy, save_npy

REASON = "contaminated"
STATS_FILE = "decontam_stats.json"
BATCH_DOCS = 2048


@dataclass
class Params:
    eval_files: list[str] = field(default_factory=list)
    ngram: int = 13
    min_ngram: int = 8
    eval_fields: list[str] = field(default_factory=list)
    window: int = 200
    min_fragment: int = 200
    max_splits: int = 10

    def __post_init__(self):
        if not self.eval_files:
            raise ValueError("eval_files is empty: name at least one evaluation file (JSONL or text)")
        if not 1 <= self.min_ngram <= self.ngram:
            raise ValueError(f"need 1 <= min_ngram <= ngram, got min_ngram={self.min_ngram}, ngram={self.ngram}")
        if self.window < 0 or self.min_fragment < 0 or self.max_splits < 1:
            raise ValueError("window and min_fragment must be >= 0 and max_splits >= 1")


class Decontaminate(GlobalStage):
    Params = Params

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        missing = [f for f in self.params.eval_files if not Path(f).is_file()]
        if missing:
            raise FileNotFoundError(f"eval file not found: {missing[0]}")

    def plan(self, inputs, plan_dir: Path, executor) -> dict:
        plan_dir = Path(plan_dir)
        inputs = [str(p) for p in inputs]
        p = self.params
        config = {"params": asdict(p), "inputs": inputs,
                  "eval_sizes": [Path(f).stat().st_size for f in p.eval_files]}
        claim_plan_dir(plan_dir, config, ("results", "ngrams.npy", "index.json", STATS_FILE))
        if (plan_dir / STATS_FILE).exists():
            return read_json(plan_dir / STATS_FILE)
        index_info = plan_dir / "index.json"
        if not index_info.exists():
            hashes, lengths, per_file = build_index(p.eval_files, p.ngram, p.min_ngram, p.eval_fields)
            save_npy(hashes, plan_dir / "ngrams.npy")
            write_json({"lengths": lengths, "ngrams": int(len(hashes)), "files": per_file}, index_info)
        info = read_json(index_info)
        jobs = [{"plan_dir": str(plan_dir), "index": i, "input": s, "lengths": info["lengths"], "window": p.window,
                 "min_fragment": p.min_fragment, "max_splits": p.max_splits} for i, s in enumerate(inputs)]
        results = executor.map(scan_task, jobs, desc=f"{self.name}: scan")
        keys = ("documents", "documents_matched", "documents_split", "documents_trimmed", "documents_removed",
                "removed_split_over_limit", "removed_no_fragment_left", "matches", "chars_removed")
        stats = {k: sum(r[k] for r in results) for k in keys}
        stats.update({"ngram": p.ngram, "min_ngram": p.min_ngram, "index_ngrams": info["ngrams"],
                      "index_lengths": info["lengths"], "eval_files": info["files"]})
        write_json(stats, plan_dir / STATS_FILE)
        return stats

    def apply_with_plan(self, table: pa.Table, shard_index: int, plan_dir: Path) -> StageResult:
        res = read_shard(Path(plan_dir) / "results" / f"{shard_index:05d}.arrow")
        meta = read_json(Path(plan_dir) / "results" / f"{shard_index:05d}.json")
        if meta["documents"] != table.num_rows:
            raise RuntimeError(f"{self.name}: shard {shard_index} has {table.num_rows} rows but the plan saw {meta['documents']}")
        if res.num_rows == 0:
            return split(table, self.name, [None] * table.num_rows)
        reasons: list = [None] * table.num_rows
        texts = None
        for row, outcome, text in zip(res.column("row").to_pylist(), res.column("outcome").to_pylist(),
                                      res.column("text").to_pylist()):
            if outcome == "removed":
                reasons[row] = REASON
            else:
                if texts is None:
                    texts = table.column(TEXT).to_pylist()
                texts[row] = text
        if texts is not None:  # same field (type, nullability) so the shard's schema does not change
            field = table.schema.field(TEXT)
            table = table.set_column(table.schema.get_field_index(TEXT), field, pa.array(texts, field.type))
        return split(table, self.name, reasons)

    def apply(self, table: pa.Table) -> StageResult:
        raise RuntimeError("decontaminate is a global stage: it runs as plan + apply_with_plan (the pipeline runner does this)")


# --- the index ------------------------------------------------------------------------------------

def eval_examples(path: str, fields: list[str]) -> list[str]:
    """The eval texts of one file: JSONL records' fields, or the non-empty lines of a text file."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    stem = p.with_suffix("").suffix if p.suffix == ".gz" else p.suffix
    out: list[str] = []
    with opener(p, "rt", encoding="utf-8") as f:
        if stem in (".jsonl", ".json", ".ndjson"):
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not a JSON line: {e}") from e
                if fields:
                    out.extend(_strings(rec.get(k)) for k in fields if k in rec)
                elif isinstance(rec, dict) and isinstance(rec.get("text"), str):
                    out.append(rec["text"])
                else:
                    out.extend(_all_strings(rec))
        else:
            out.extend(line for line in f if line.strip())
    return [t for t in out if t]


def _strings(v) -> str:
    return v if isinstance(v, str) else "\n".join(_all_strings(v))


def _all_strings(v) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for x in v.values() for s in _all_strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _all_strings(x)]
    return []


def build_index(files: list[str], ngram: int, min_ngram: int, fields: list[str]):
    """(sorted unique n-gram hashes, sorted n-gram lengths used, per-file counts)."""
    hashes, lengths, per_file = [], set(), []
    for f in files:
        ex = eval_examples(f, fields)
        if ex:
            wh, _, _, wo = words(ex)
            h, ln = _example_ngrams(wh, wo, ngram, min_ngram)
        else:
            h, ln = np.zeros(0, np.uint64), np.zeros(0, np.int64)
        hashes.append(h)
        lengths.update(int(x) for x in np.unique(ln))
        short = int(np.count_nonzero(np.diff(wo) < min_ngram)) if ex else 0
        per_file.append({"file": f, "examples": len(ex), "ngrams": int(len(np.unique(h))), "too_short": short})
    all_h = np.unique(np.concatenate(hashes)) if hashes else np.zeros(0, np.uint64)
    return all_h, sorted(lengths), per_file


# --- the scan -------------------------------------------------------------------------------------

def find_matches(texts, table: np.ndarray, lengths: list[int]) -> dict[int, list[tuple[int, int]]]:
    """{document index: [(start, end) character spans of matched n-grams]} for a batch of texts."""
    wh, ws, we, wo = words(texts)
    d, f, c = _match_kernel(wh, wo, np.asarray(lengths, np.int64), table)
    out: dict[int, list[tuple[int, int]]] = {}
    for di, fi, ci in zip(d.tolist(), f.tolist(), c.tolist()):
        base = int(wo[di])
        out.setdefault(di, []).append((int(ws[base + fi]), int(we[base + fi + ci - 1])))
    return out


def cut(text: str, spans: list[tuple[int, int]], window: int, min_fragment: int) -> tuple[list[str], int]:
    """The pieces of ``text`` left after removing each span plus ``window`` characters on each side;
    pieces shorter than ``min_fragment`` (after stripping whitespace) are dropped. Returns (pieces, chars removed)."""
    cuts = sorted((max(0, s - window), min(len(text), e + window)) for s, e in spans)
    merged: list[list[int]] = []
    for s, e in cuts:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    pieces, pos = [], 0
    for s, e in merged:
        pieces.append(text[pos:s])
        pos = e
    pieces.append(text[pos:])
    pieces = [p.strip() for p in pieces]
    kept = [p for p in pieces if len(p) >= min_fragment]
    return kept, len(text) - sum(len(p) for p in kept)


def scan_task(job: dict) -> dict:
    plan_dir = Path(job["plan_dir"])
    out = plan_dir / "results" / f"{job['index']:05d}.arrow"
    meta = plan_dir / "results" / f"{job['index']:05d}.json"
    if meta.exists() and out.exists():
        return read_json(meta)
    table = load_npy(plan_dir / "ngrams.npy", mmap=False)
    texts = read_shard(job["input"], columns=[TEXT]).column(TEXT)
    n = len(texts)
    rows, outcomes, new_texts, n_matches, n_pieces = [], [], [], [], []
    counts = dict.fromkeys(("documents_matched", "documents_split", "documents_trimmed", "documents_removed",
                            "removed_split_over_limit", "removed_no_fragment_left", "matches", "chars_removed"), 0)
    for lo in range(0, n, BATCH_DOCS):
        batch = texts.slice(lo, min(BATCH_DOCS, n - lo))
        for d, spans in sorted(find_matches(batch, table, job["lengths"]).items()):
            text = batch[d].as_py()
            pieces, removed = cut(text, spans, job["window"], job["min_fragment"])
            counts["documents_matched"] += 1
            counts["matches"] += len(spans)
            if not pieces or len(pieces) > job["max_splits"]:
                outcome, new = "removed", None
                counts["documents_removed"] += 1
                counts["removed_no_fragment_left" if not pieces else "removed_split_over_limit"] += 1
                removed = len(text)
            elif len(pieces) == 1:
                outcome, new = "trimmed", pieces[0]
                counts["documents_trimmed"] += 1
            else:
                outcome, new = "split", "\n\n".join(pieces)
                counts["documents_split"] += 1
            counts["chars_removed"] += removed
            rows.append(lo + d)
            outcomes.append(outcome)
            new_texts.append(new)
            n_matches.append(len(spans))
            n_pieces.append(len(pieces))
    write_shard(pa.table({
        "row": pa.array(rows, pa.int64()), "outcome": pa.array(outcomes, pa.string()),
        "matches": pa.array(n_matches, pa.int64()), "pieces": pa.array(n_pieces, pa.int64()),
        "text": pa.array(new_texts, pa.large_string()),
    }), out)
    result = {"documents": n, **counts}
    write_json(result, meta)
    return result


