"""``decontaminate``: cut evaluation-set n-grams out of the training text, with the MT-NLG rules
(Megatron-LM ``filter_ngrams.py``, NeMo Curator ``TaskDecontamination``).

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
    max_matches = 10    # an eval n-gram found in more than this many training documents is a common
                        # phrase, not a leak: it is not used to cut (0 = every n-gram cuts, as before)
    split_output = "documents"  # the pieces of a split document become separate documents (same
                        # ``id``, ``split_id`` 0, 1, ...); "joined": one document, pieces joined by a
                        # blank line (the behaviour before this key; no ``split_id`` column)
    fold_digits = false # true: digits fold to 0 before comparing, as in minhash_dedup (the behaviour
                        # before this key); false: a number matches only the same number

The index: every example of every eval file (a JSONL record's fields, or a non-empty line of a text
file) is normalized into words as ``minhash_dedup`` does (lowercase, punctuation removed, whitespace
collapsed; see ``curate.stages.minhash.shingles``) except that digits are kept as they are, as
Megatron-LM and NeMo Curator compare them (``fold_digits = true``: every digit folds to 0 as in
``minhash_dedup``, so "in 1999 the rate was 4.5" matches "in 2024 the rate was 3.1"; the behaviour
before this key). An example of at
least ``ngram`` words contributes all its ``ngram``-grams; one of ``min_ngram`` to ``ngram - 1``
words contributes itself whole; shorter ones nothing (Megatron-LM ``filter_ngrams.py`` does the
same). n-grams are kept as 64-bit hashes, sorted, in ``plan_dir/ngrams.npy``.

The scan (compiled): every run of n words of a document (for every n in the index) is looked up.
An n-gram found in more than ``max_matches`` documents (each document counted once) is dropped from
the matches. Each remaining match removes the matched span plus ``window`` characters on each side
of it, in the original text; overlapping cuts merge. The pieces left, stripped of surrounding
whitespace, are kept if they have at least ``min_fragment`` characters. The outcome per document:

- no match: untouched (the row passes through byte for byte; ``split_id`` null);
- **trimmed**: one piece left (the cut touched the start or the end, or the rest was too short);
- **split**: two to ``max_splits`` pieces left: one document per piece (``split_output``; ``split_id``
  0, 1, ... in text order; the pieces of a piece ``s`` that a later ``decontaminate`` stage splits again
  take ``(s + 1) * NESTED + 0, 1, ...``, numbers made from ``s`` rather than counted from those in sight, so
  ``(id, split_id)`` stays unique whatever ran between the stages, a piece set aside there included:
  ``_replace_texts``);
- **removed**: no piece left, or more than ``max_splits`` pieces: set aside with reason
  ``contaminated``.

The plan is the partitioned shuffle of ``curate.shuffle`` (no task reads every shard):

    ngrams.npy, index.json   the index                                             (one task)
    matches/GGGGG.arrow      per shard group: every match (doc, n-gram, span)       (scan_task)
    pairs/GGGGG.arrow        per shard group: (n-gram, doc), one batch per hash range
    frequent/RRRRR.npy       per range: n-grams in more than max_matches documents (count_task)
    frequent.npy             all of them (at most the index's size)                 (one task)
    results/GGGGG.arrow      per shard group, one batch per shard: outcome and pieces (cut_task)

The plan returns (and the runner puts in ``stats.json`` under this stage's ``plan``) the MT-NLG
report: ``documents_split``, ``documents_trimmed``, ``documents_removed`` (and of those
``removed_split_over_limit``), plus matches, ``ngrams_too_common``, ``pieces_added`` (documents
added by splits) and characters removed.
"""
from __future__ import annotations

import functools
import gzip
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate import json_files
from curate import shuffle
from curate.readers.text import clean_surrogates
from curate.schema import TEXT
from curate.shards import claim_plan_dir, read_json, read_shard, write_json
from curate.stages.base import GlobalStage, StageResult, split
from curate.stages.minhash.kernels import MAX_NGRAM, _example_ngrams, _match_kernel
from curate.stages.minhash.shingles import words
from curate.stages.minhash.store import load_npy, save_npy

REASON = "contaminated"
REASONS = {REASON: "no piece left after cutting eval n-grams, or more than max_splits pieces"}
STATS_FILE = "decontam_stats.json"
BATCH_DOCS = 2048
SPLIT_ID = "split_id"
SPLIT_OUTPUTS = ("documents", "joined")
MAX_CHARS = 100_000_000  # window, min_fragment: ten times the largest default document (max_doc_bytes), far from int64
MAX_PIECES = 1_000_000  # max_splits
NESTED = 1 << 20  # the pieces of piece s split again: split_id (s + 1) * NESTED + j (_nested_ids)
MAX_SPLIT_ID = (1 << 63) - 1  # split_id is an int64
assert MAX_PIECES < NESTED
MAX_DOCS = 1 << 40  # max_matches (0 = no limit)
MATCHES = pa.schema([("doc", pa.uint64()), ("ngram", pa.uint64()), ("start", pa.int64()), ("end", pa.int64())])
PAIRS = pa.schema([("ngram", pa.uint64()), ("doc", pa.uint64())])
RESULTS = pa.schema([("row", pa.int64()), ("outcome", pa.string()), ("matches", pa.int64()),
                     ("pieces", pa.list_(pa.large_string()))])
COUNT_KEYS = ("documents_matched", "documents_split", "documents_trimmed", "documents_removed", "removed_split_over_limit",
              "removed_no_fragment_left", "matches", "matches_ignored_common", "pieces_added", "chars_removed")
_PARTS = ("matches", "pairs", "frequent", "results", "ngrams.npy", "index.json", "frequent.npy", shuffle.LAYOUT_FILE, STATS_FILE)


@dataclass
class Params:
    # evaluation sets: JSONL (.jsonl, .json, .gz) or text, one example a line
    eval_files: list[str] = field(default_factory=list)
    ngram: int = 13  # n-gram length in words (GPT-3 / MT-NLG: 13)
    min_ngram: int = 8  # an example of min_ngram..ngram-1 words is itself one n-gram
    # JSONL keys holding eval text; [] = "text" if present, else every string value
    eval_fields: list[str] = field(default_factory=list)
    window: int = 200  # characters removed on each side of a matched n-gram
    min_fragment: int = 200  # fragments shorter than this (characters) are dropped
    max_splits: int = 10  # a document left in more pieces than this is removed
    max_matches: int = 10  # an n-gram found in more documents than this is a common phrase, not cut (0: no limit)
    split_output: str = "documents"  # "documents": pieces become documents (same id, split_id); "joined": one document
    # true: digits fold to 0 before comparing (as minhash_dedup does; "2024" matches "1999"). false: a number
    # matches only itself, as Megatron-LM's and NeMo Curator's task decontamination compare them
    fold_digits: bool = False

    def __post_init__(self):
        if not self.eval_files:
            raise ValueError("eval_files is empty: name at least one evaluation file (JSONL or text)")
        if not 1 <= self.ngram <= MAX_NGRAM:
            raise ValueError(f"ngram = {self.ngram}: must be in [1, {MAX_NGRAM}] (words hashed as one n-gram; "
                             f"GPT-3 and MT-NLG use 13)")
        if not 1 <= self.min_ngram <= self.ngram:
            raise ValueError(f"need 1 <= min_ngram <= ngram, got min_ngram={self.min_ngram}, ngram={self.ngram}")
        for name, low, high, unit in (("window", 0, MAX_CHARS, "characters"), ("min_fragment", 0, MAX_CHARS, "characters"),
                                      ("max_splits", 1, MAX_PIECES, "pieces"), ("max_matches", 0, MAX_DOCS, "documents")):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} = {value}: must be in [{low}, {high:,}] ({unit})"
                                 + ("; 0 = no limit" if name == "max_matches" else ""))
        if self.split_output not in SPLIT_OUTPUTS:
            raise ValueError(f"split_output = {self.split_output!r}; allowed: {', '.join(SPLIT_OUTPUTS)}")


@dataclass(frozen=True)
class PlanSettings:
    """What the plan's tasks need: the stage's parameters, and the n-gram lengths of the index once it is built."""

    params: Params
    lengths: tuple[int, ...] = ()


class Decontaminate(GlobalStage):
    Params = Params

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        for f in self.params.eval_files:
            try:
                st = Path(f).stat()
            except FileNotFoundError:
                raise FileNotFoundError(f"eval file not found: {f[:300]}") from None
            except OSError as e:  # a name too long, no permission, a loop of links
                raise ValueError(f"eval file {f[:300]!r}: {e.strerror}") from None
            if not stat.S_ISREG(st.st_mode):  # a folder, a FIFO (its read would wait forever), a device
                raise ValueError(f"eval file {f[:300]!r}: not a regular file; give JSONL or text files")

    def check_at_start(self) -> None:
        """Each eval file read once before the run starts (``runner``): one that is not UTF-8, holds a line that
        is not JSON, or holds no text would otherwise stop the run only after every input was read."""
        for f in self.params.eval_files:
            try:
                texts = eval_examples(f, self.params.eval_fields)
            except (ValueError, OSError, EOFError) as e:
                raise ValueError(str(e) if str(e).startswith(str(f)) else f"eval file {f}: {e}") from None
            if not texts:
                raise ValueError(f"eval file {f}: no text in it" + (
                    f" (eval_fields = {self.params.eval_fields})" if self.params.eval_fields else ""))
            wo = words(texts, self.params.fold_digits)[3]
            if not np.any(np.diff(wo) >= self.params.min_ngram):  # nothing to look for: the stage would do nothing
                raise ValueError(
                    f"eval file {f}: no example of min_ngram = {self.params.min_ngram} words or more (every one "
                    f"of its {len(texts)} texts is shorter), so it would remove nothing: give the file of the "
                    f"benchmark's texts, or lower min_ngram")

    def plan(self, inputs, plan_dir: Path, executor) -> dict:
        plan_dir = Path(plan_dir)
        inputs = [str(p) for p in inputs]
        p = self.params
        layout = shuffle.make_layout(inputs)
        config = {"params": asdict(p), "inputs": inputs, "layout": shuffle.config_of(layout),
                  "eval_sizes": [Path(f).stat().st_size for f in p.eval_files]}
        claim_plan_dir(plan_dir, config, _PARTS)
        if (plan_dir / STATS_FILE).exists():
            return read_json(plan_dir / STATS_FILE)
        shuffle.save_layout(layout, plan_dir)
        info = executor.map(index_task, [shuffle.PlanJob(str(plan_dir), PlanSettings(p))])[0]
        settings = PlanSettings(p, tuple(info["lengths"]))
        groups = shuffle.group_jobs(plan_dir, settings, layout, inputs)
        executor.map(scan_task, groups)
        common = executor.map(count_task, shuffle.range_jobs(plan_dir, settings, layout))
        executor.map(frequent_task, [shuffle.PlanJob(str(plan_dir), settings)])
        results = executor.map(cut_task, groups)
        stats = {"documents": sum(sum(r["rows"]) for r in results)}
        stats.update({k: sum(r[k] for r in results) for k in COUNT_KEYS})
        stats.update({"ngrams_too_common": sum(c["frequent"] for c in common),
                      "ngrams_matched": sum(c["ngrams"] for c in common),
                      "max_matches": p.max_matches, "split_output": p.split_output,
                      "ngram": p.ngram, "min_ngram": p.min_ngram, "index_ngrams": info["ngrams"],
                      "index_lengths": info["lengths"], "eval_files": info["files"]})
        write_json(stats, plan_dir / STATS_FILE)
        return stats

    def apply_with_plan(self, table: pa.Table, shard_index: int, plan_dir: Path, context=None) -> StageResult:
        plan_dir = Path(plan_dir)
        layout = shuffle.load_layout(plan_dir)
        g = layout.group_of(shard_index)
        path = plan_dir / "results" / f"{g:05d}.arrow"
        rows = _cached_json(str(path.with_suffix(".json")))["rows"][shard_index - layout.bounds[g]]
        if rows != table.num_rows:
            raise RuntimeError(f"{self.name}: shard {shard_index} has {table.num_rows} rows but the plan saw {rows}")
        res = shuffle.read_part([path], shard_index - layout.bounds[g], RESULTS)
        documents = self.params.split_output == "documents"
        if res.num_rows == 0:
            if documents:
                table = _with_split_id(table, None)
            return split(table, self.name, [None] * table.num_rows)
        reasons: list = [None] * table.num_rows
        pieces: dict[int, list[str]] = {}
        for row, outcome, parts in zip(res.column("row").to_pylist(), res.column("outcome").to_pylist(),
                                       res.column("pieces").to_pylist()):
            if outcome == "removed":
                reasons[row] = REASON
            else:
                pieces[row] = parts if documents else ["\n\n".join(parts)]
        result = split(_replace_texts(table, pieces, documents), self.name,
                       [r for i, r in enumerate(reasons) for _ in range(len(pieces.get(i, [None])))])
        added = sum(len(v) - 1 for v in pieces.values())
        return StageResult(result.kept, result.dropped, added)



# --- the index ------------------------------------------------------------------------------------

def eval_examples(path: str, fields: list[str]) -> list[str]:
    """The eval texts of one file: JSONL records' fields, or the non-empty lines of a text file (lone
    surrogates replaced with U+FFFD)."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    stem = p.with_suffix("").suffix if p.suffix == ".gz" else p.suffix
    out: list[str] = []
    with opener(p, "rt", encoding="utf-8") as f:
        if stem in (".jsonl", ".json", ".ndjson"):
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                rec = json_files.loads(line, f"{path}:{n}")
                if fields:
                    if isinstance(rec, dict):
                        out.extend(_strings(rec.get(k)) for k in fields if k in rec)
                elif isinstance(rec, dict) and isinstance(rec.get("text"), str):
                    out.append(rec["text"])
                else:
                    out.extend(_all_strings(rec))
        else:
            out.extend(line for line in f if line.strip())
    # JSON's "\ud800" escapes give strings that are not valid Unicode (the index's Arrow buffers refuse them):
    # U+FFFD instead, as the readers do for documents
    return [clean_surrogates(t)[0] for t in out if t]


def _strings(v) -> str:
    return v if isinstance(v, str) else "\n".join(_all_strings(v))


def _all_strings(v) -> list[str]:
    """Every string inside a JSON value, in document order (iteratively: a record may nest deep)."""
    out, stack = [], [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, list):
            stack.extend(reversed(x))
    return out


def build_index(files: list[str], ngram: int, min_ngram: int, fields: list[str], fold_digits: bool = True):
    """(sorted unique n-gram hashes, sorted n-gram lengths used, per-file counts); ``fold_digits`` must be
    the scan's (``find_matches``)."""
    hashes, lengths, per_file = [], set(), []
    for f in files:
        ex = eval_examples(f, fields)
        if ex:
            wh, _, _, wo = words(ex, fold_digits)
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

def find_matches(texts, table: np.ndarray, lengths: list[int], fold_digits: bool = True
                 ) -> dict[int, list[tuple[int, int, int]]]:
    """{document index: [(start, end, n-gram hash)]}: character spans of matched n-grams, for a batch of texts.
    ``fold_digits`` must be the one the index ``table`` was built with (the stage passes its parameter; the
    default, folding, is ``words``')."""
    wh, ws, we, wo = words(texts, fold_digits)
    d, f, c, h = _match_kernel(wh, wo, np.asarray(lengths, np.int64), table)
    out: dict[int, list[tuple[int, int, int]]] = {}
    for di, fi, ci, hi in zip(d.tolist(), f.tolist(), c.tolist(), h.tolist()):
        base = int(wo[di])
        out.setdefault(di, []).append((int(ws[base + fi]), int(we[base + fi + ci - 1]), hi))
    return out


def cut(text: str, spans: list[tuple[int, int]], window: int, min_fragment: int) -> tuple[list[str], int]:
    """The pieces of ``text`` left after removing each span plus ``window`` characters on each side;
    pieces shorter than ``min_fragment`` (after stripping whitespace), and empty ones, are dropped. Returns (pieces, chars removed)."""
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
    kept = [p for p in pieces if p and len(p) >= min_fragment]  # never an empty piece, whatever min_fragment
    return kept, len(text) - sum(len(p) for p in kept)


def index_task(job: shuffle.PlanJob) -> dict:
    """The eval n-gram index (one task): ``ngrams.npy`` and ``index.json``."""
    plan_dir, p = Path(job.plan_dir), job.settings.params
    index_info = plan_dir / "index.json"
    if not index_info.exists():
        hashes, lengths, per_file = build_index(p.eval_files, p.ngram, p.min_ngram, p.eval_fields, p.fold_digits)
        save_npy(hashes, plan_dir / "ngrams.npy")
        write_json({"lengths": lengths, "ngrams": int(len(hashes)), "files": per_file}, index_info)
    return read_json(index_info)


def scan_task(job: shuffle.PlanJob) -> dict:
    """One shard group: every match, and the distinct (n-gram, document) pairs sent to their hash range."""
    plan_dir = Path(job.plan_dir)
    out = plan_dir / "matches" / f"{job.group:05d}.arrow"
    pairs_out = plan_dir / "pairs" / f"{job.group:05d}.arrow"
    if out.exists() and pairs_out.exists():
        return {}
    layout = shuffle.load_layout(plan_dir)
    first = layout.bounds[job.group]
    table = load_npy(plan_dir / "ngrams.npy", mmap=False)
    docs, grams, starts, ends = [], [], [], []
    for i, path in enumerate(job.inputs):
        texts = read_shard(path, columns=[TEXT]).column(TEXT)
        n = len(texts)
        for lo in range(0, n, BATCH_DOCS):
            batch = texts.slice(lo, min(BATCH_DOCS, n - lo))
            found = find_matches(batch, table, list(job.settings.lengths), job.settings.params.fold_digits)
            for d, spans in sorted(found.items()):
                for s, e, h in spans:
                    docs.append((first + i) << 32 | (lo + d))
                    grams.append(h)
                    starts.append(s)
                    ends.append(e)
    m = pa.table({"doc": pa.array(docs, pa.uint64()), "ngram": pa.array(grams, pa.uint64()),
                  "start": pa.array(starts, pa.int64()), "end": pa.array(ends, pa.int64())}, schema=MATCHES)
    shuffle.write_parts(m, np.zeros(m.num_rows, np.int64), 1, out)
    key = shuffle.unique_pairs(np.asarray(grams, np.uint64), np.asarray(docs, np.uint64))
    pairs = pa.table({"ngram": key[:, 0], "doc": key[:, 1]}, schema=PAIRS)
    shuffle.write_parts(pairs, shuffle.key_range(key[:, 0], layout.ranges), layout.ranges, pairs_out)
    return {}


def count_task(job: shuffle.PlanJob) -> dict:
    """One hash range: the n-grams found in more than ``max_matches`` documents (``frequent/RRRRR.npy``)."""
    plan_dir = Path(job.plan_dir)
    out = plan_dir / "frequent" / f"{job.range:05d}.npy"
    layout = shuffle.load_layout(plan_dir)
    if not (out.exists() and out.with_suffix(".json").exists()):  # the marker is written last
        t = shuffle.read_part(shuffle.numbered(plan_dir, "pairs", layout.groups), job.range, PAIRS)
        grams, counts = np.unique(t.column("ngram").to_numpy(), return_counts=True)  # pairs are distinct
        limit = job.settings.params.max_matches
        save_npy(grams[counts > limit] if limit else np.zeros(0, np.uint64), out)
        write_json({"ngrams": int(len(grams))}, out.with_suffix(".json"))
    return {"frequent": int(len(load_npy(out))), "ngrams": read_json(out.with_suffix(".json"))["ngrams"]}


def frequent_task(job: shuffle.PlanJob) -> int:
    """All the too-common n-grams in one sorted array (one task; at most the index's size)."""
    plan_dir = Path(job.plan_dir)
    out = plan_dir / "frequent.npy"
    if not out.exists():
        layout = shuffle.load_layout(plan_dir)
        parts = [load_npy(f, mmap=False) for f in shuffle.numbered(plan_dir, "frequent", layout.ranges, ".npy")]
        save_npy(np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.uint64), out)
    return int(len(load_npy(out)))


def cut_task(job: shuffle.PlanJob) -> dict:
    """One shard group: cut the documents with matches (common n-grams left out), one batch per shard."""
    plan_dir = Path(job.plan_dir)
    out, marker, info = shuffle.task_output(plan_dir, "results", job.group)
    if info is not None:
        return info
    layout = shuffle.load_layout(plan_dir)
    first = layout.bounds[job.group]
    frequent = load_npy(plan_dir / "frequent.npy", mmap=False)
    m = shuffle.read_part([plan_dir / "matches" / f"{job.group:05d}.arrow"], 0, MATCHES)
    grams = m.column("ngram").to_numpy()
    common = np.isin(grams, frequent) if len(frequent) else np.zeros(len(grams), bool)
    counts = dict.fromkeys(COUNT_KEYS, 0)
    counts["matches_ignored_common"] = int(common.sum())
    m = m.filter(pa.array(~common))
    doc = m.column("doc").to_numpy()
    starts, ends = m.column("start").to_numpy(), m.column("end").to_numpy()
    shard_of = shuffle.key_shard(doc)
    rows, part, outcomes, n_matches, all_pieces, row_counts = [], [], [], [], [], []
    for i, path in enumerate(job.inputs):
        sel = np.flatnonzero(shard_of == first + i)
        if len(sel) == 0:
            row_counts.append(_num_rows(path))
            continue
        texts = read_shard(path, columns=[TEXT]).column(TEXT)
        row_counts.append(len(texts))
        r = shuffle.key_row(doc[sel])
        bounds = np.flatnonzero(np.r_[True, r[1:] != r[:-1], True])
        for a, z in zip(bounds[:-1], bounds[1:]):
            row = int(r[a])
            text = texts[row].as_py() or ""
            spans = list(zip(starts[sel[a:z]].tolist(), ends[sel[a:z]].tolist()))
            pieces, removed = cut(text, spans, job.settings.params.window, job.settings.params.min_fragment)
            counts["documents_matched"] += 1
            counts["matches"] += len(spans)
            if not pieces or len(pieces) > job.settings.params.max_splits:
                outcome = "removed"
                counts["documents_removed"] += 1
                counts["removed_no_fragment_left" if not pieces else "removed_split_over_limit"] += 1
                removed, pieces = len(text), []
            elif len(pieces) == 1:
                outcome = "trimmed"
                counts["documents_trimmed"] += 1
            else:
                outcome = "split"
                counts["documents_split"] += 1
                counts["pieces_added"] += len(pieces) - 1
            counts["chars_removed"] += removed
            rows.append(row)
            part.append(i)
            outcomes.append(outcome)
            n_matches.append(len(spans))
            all_pieces.append(pieces)
    res = pa.table({"row": pa.array(rows, pa.int64()), "outcome": pa.array(outcomes, pa.string()),
                    "matches": pa.array(n_matches, pa.int64()),
                    "pieces": pa.array(all_pieces, pa.list_(pa.large_string()))}, schema=RESULTS)
    shuffle.write_parts(res, np.asarray(part, np.int64), len(job.inputs), out, compression="zstd")
    info = {"rows": row_counts, **counts}
    write_json(info, marker)
    return info


def _num_rows(path: str) -> int:
    if str(path).endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    return read_shard(path, columns=[]).num_rows


def _cached_json(path: str):
    return _read_json_at(path, Path(path).stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_json_at(path: str, mtime_ns: int):
    return read_json(path)


def _with_split_id(table: pa.Table, values) -> pa.Table:
    arr = pa.array(values if values is not None else [None] * table.num_rows, pa.int64())
    if SPLIT_ID in table.column_names:
        if values is None:
            return table
        return table.set_column(table.column_names.index(SPLIT_ID), SPLIT_ID, arr)
    return table.append_column(SPLIT_ID, arr)


def _replace_texts(table: pa.Table, pieces: dict[int, list[str]], documents: bool) -> pa.Table:
    """``table`` with the rows in ``pieces`` replaced by one row per piece (text = the piece); with
    ``documents`` a ``split_id`` column numbers the pieces of split documents (null elsewhere).

    ``split_id`` of a document split here: 0, 1, ... in text order. A piece an earlier ``decontaminate``
    stage made (``split_id`` s) and this one splits again: its pieces take numbers made from s
    (:func:`_nested_ids`), not the next ones after the largest in sight, which a stage between the two may
    have set aside: ``(id, split_id)`` stays unique wherever ids are, whatever ran in between. A piece not
    split again (trimmed, or untouched) keeps its number."""
    counts = np.ones(table.num_rows, np.int64)
    for row, p in pieces.items():
        counts[row] = len(p)
    take = np.repeat(np.arange(table.num_rows), counts)
    out = table.take(pa.array(take, pa.int64())) if len(pieces) else table
    texts = out.column(TEXT).to_pylist()
    pos = np.concatenate([[0], np.cumsum(counts)])
    for row, p in pieces.items():
        texts[pos[row]:pos[row] + len(p)] = p
    field = out.schema.field(TEXT)  # same field (type, nullability) so the shard's schema does not change
    out = out.set_column(out.schema.get_field_index(TEXT), field, pa.array(texts, field.type))
    if not documents:
        return out
    if SPLIT_ID in table.column_names:  # an earlier split keeps its number where this one does not split
        before = table.column(SPLIT_ID).to_pylist()
        split_ids = out.column(SPLIT_ID).to_pylist()
    else:
        before, split_ids = [None] * table.num_rows, [None] * out.num_rows
    for row in sorted(pieces):
        p, lo = pieces[row], int(pos[row])
        if len(p) < 2:
            continue  # trimmed: the row keeps its split_id (null, or an earlier split's)
        split_ids[lo:lo + len(p)] = list(range(len(p))) if before[row] is None else _nested_ids(before[row], len(p))
    return _with_split_id(out, split_ids)


def _nested_ids(s: int, n: int) -> list[int]:
    """The ``split_id`` of the ``n`` pieces of piece ``s`` split again: ``(s + 1) * NESTED + j``, j = 0 ... n - 1.

    Unique without knowing the other pieces (some may have been set aside since): the numbers of a first split
    are below ``NESTED`` (``max_splits`` is at most ``MAX_PIECES`` < ``NESTED``), those made here are ``NESTED``
    or more, and each tells its parent and place (``divmod(number, NESTED)``); a piece is split again at most
    once, since its first piece takes a new number too and ``s`` is gone. Three splits of one text deep fit in
    an int64; a fourth stops the stage, saying what to do."""
    first = (s + 1) * NESTED
    if s < 0 or first + n - 1 > MAX_SPLIT_ID:
        raise ValueError(f"{SPLIT_ID} {s} split again: its pieces' numbers would pass 2**63 - 1 (a text split by "
                         "four decontaminate stages in a row); give fewer decontaminate stages (one stage takes "
                         "several eval_files)")
    return list(range(first, first + n))
