"""``pretrain tokenize --parts`` / ``--executor ray``: curated shards to a dataset of parts, on any executor.

The shards of the manifest are cut, in order, into groups of about ``part_bytes`` of shard files; one task per
group tokenizes its shards (documents in manifest order, each followed by EOD) into ``PREFIX/part-NNNNN.bin/.idx``.
The tasks run on ``curate``'s executors (a local process pool, or Ray tasks on a cluster), with the lock and
markers of ``curate run``: ``PREFIX/run.lock`` keeps a second run out; a finished task's marker
``PREFIX/_tasks/part-NNNNN.json`` is written after its files, and counts on a rerun only while its key (the job:
tokenizer, settings, the version of the text reading rules; its shards' names, rows and sha256) matches, so a
killed run resumes where it was and a task lost with its node is run again elsewhere (only that task).
``PREFIX/parts.json`` is written last, when every part is there (:mod:`pretrain.data.parts`). Every shard is checked
against its manifest entry (sha256, rows) by the task that reads it (:mod:`pretrain.data.manifest_check`).
``merge=True`` then writes ``PREFIX.bin/.idx``, the bytes tokenizing in one process writes. A marker's counts are
checked against its part's files before they go into parts.json, and a parts.json whose parts' files are not the
sizes it records is not up to date (the damaged parts are tokenized again). A folder ``PREFIX/`` (or with ``merge``
a ``PREFIX.bin/.idx/.json``) holding files Quarry did not write is refused unless ``force``.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate import json_files
from pretrain.data.indexed import IndexedDatasetBuilder, atomic_file, data_file_path, index_file_path, optimal_dtype
from pretrain.data.manifest_check import ManifestShard, input_shards, manifest_entries, verify_shard
from pretrain.data.parts import (
    PARTS_INDEX, check_part_files, marker_holds, part_name, parts_index_path, read_parts_index, write_parts_index,
)

JOB_VERSION = 1
DEFAULT_PART_BYTES = 1 << 30  # shard bytes per part (and per task)
MARKERS = "_tasks"


@dataclass(frozen=True)
class PartTask:
    index: int
    key: str  # the marker counts while it holds this
    shards: tuple[ManifestShard, ...]
    folder: str  # PREFIX, absolute
    tokenizer: str  # the .model, absolute (every node sees it at this path)
    specials: tuple  # (name, id) pairs
    dtype: str
    text_column: str

    @property
    def name(self) -> str:
        return part_name(self.index)


def group_shards(shards: list[ManifestShard], part_bytes: int) -> list[list[ManifestShard]]:
    """Consecutive shards in groups of about ``part_bytes`` of files (at least one shard each)."""
    groups: list[list[ManifestShard]] = []
    size = 0
    for s in shards:
        if not groups or size >= part_bytes:
            groups.append([])
            size = 0
        groups[-1].append(s)
        size += os.path.getsize(s.path)
    return groups


# ----------------------------------------------------------------------------------------------- worker

_TOKENIZERS: dict = {}


def _tokenizer(path: str, specials: tuple):
    from pretrain.data.tokenizer import Tokenizer

    key = (path, specials)
    if key not in _TOKENIZERS:
        _TOKENIZERS.clear()
        _TOKENIZERS[key] = Tokenizer(path, dict(specials))
    return _TOKENIZERS[key]


def _units(path: str) -> int:
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    if path.endswith(".parquet"):
        return pq.ParquetFile(path).metadata.num_row_groups
    with ipc.open_file(path) as reader:
        return reader.num_record_batches


def tokenize_part(task: PartTask) -> dict:
    """One task: check its shards against the manifest, tokenize them in order into ``PREFIX/part-NNNNN``."""
    from pretrain.data.tokenize import CHUNK_DOCS, Task, add_skipped, encode_documents, read_task_column

    cpu0 = time.process_time()
    tokenizer = _tokenizer(task.tokenizer, task.specials)
    dtype = np.dtype(task.dtype)
    stats = {"task": task.index, "name": task.name, "key": task.key, "documents": 0, "tokens": 0, "rows": 0,
             "text_bytes": 0, "errors": 0, "empty": 0, "shards": len(task.shards), "skipped": []}
    prefix = os.path.join(task.folder, task.name)
    with IndexedDatasetBuilder(prefix, dtype) as builder:
        for shard in task.shards:
            verify_shard(shard)
            rows = 0
            for unit in range(_units(shard.path)):
                column, nbytes = read_task_column(Task(0, shard.path, unit), task.text_column)
                rows += len(column)
                stats["text_bytes"] += nbytes
                for start in range(0, len(column), CHUNK_DOCS):
                    ids, counts = encode_documents(tokenizer, column.slice(start, CHUNK_DOCS).to_pylist())
                    add_skipped(stats, shard.path, unit, start, counts["skipped"])
                    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
                    total = int(lengths.sum())
                    builder.add_documents(np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=total),
                                          lengths)
                    stats["documents"] += len(ids)
                    stats["tokens"] += total
                    stats["errors"] += counts["errors"]
                    stats["empty"] += counts["empty"]
            if rows != shard.rows:  # the metadata agreed, the batches did not: a crafted file
                raise ValueError(f"shard {shard.name}: read {rows:,} rows, its manifest entry says {shard.rows:,}")
            stats["rows"] += rows
    stats["bin_bytes"] = os.path.getsize(data_file_path(prefix))
    stats["idx_bytes"] = os.path.getsize(index_file_path(prefix))
    stats["cpu_seconds"] = round(time.process_time() - cpu0, 4)
    return stats


# ----------------------------------------------------------------------------------------------- driver

def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _read_marker(path: Path, key: str, folder: Path) -> dict | None:
    """A finished task's counts, or None when its marker is missing, damaged, of another key, or its files are not
    the ones it recorded: sizes, and the documents and tokens its ``.idx`` holds (the task is then run again; a
    marker's counts go into parts.json, so they are checked, not taken on trust)."""

    try:
        m = json_files.read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(m, dict) or m.get("key") != key:
        return None
    prefix = folder / path.stem
    try:
        if os.path.getsize(data_file_path(prefix)) != m["bin_bytes"] or not os.path.isfile(index_file_path(prefix)):
            return None
        if "idx_bytes" in m and os.path.getsize(index_file_path(prefix)) != m["idx_bytes"]:
            return None
        if not marker_holds(prefix, m, ("documents", "tokens", "rows", "errors", "empty", "text_bytes", "shards")):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    m["idx_bytes"] = os.path.getsize(index_file_path(prefix))  # markers of older runs did not record it
    return m


def _claim(folder: Path, job_key: str, job: dict, log) -> None:
    """``PREFIX/job.json`` for this job; parts and markers of another job (tokenizer, settings) are removed."""
    job_file = folder / "job.json"
    try:
        old = json_files.read_json(job_file).get("job_key")
    except (OSError, ValueError, AttributeError):
        old = None
    if old is not None and old != job_key:
        log(f"{folder}: written with another tokenizer or settings: its parts are tokenized again")
        _remove_parts(folder, keep=set())
        shutil.rmtree(folder / MARKERS, ignore_errors=True)
    if old != job_key:
        with atomic_file(job_file) as f:
            f.write(json.dumps({"job_key": job_key, **job}, indent=2).encode())
    for tmp in folder.glob(".*.tmp"):  # half-written files of a killed run
        tmp.unlink(missing_ok=True)


def _remove_parts(folder: Path, keep: set[str]) -> None:
    for p in list(folder.glob("part-*.bin")) + list(folder.glob("part-*.idx")):
        if p.stem not in keep:
            p.unlink(missing_ok=True)
    for m in (folder / MARKERS).glob("part-*.json") if (folder / MARKERS).is_dir() else ():
        if m.stem not in keep:
            m.unlink(missing_ok=True)


def tokenize_to_parts(input_dir, tokenizer_path, output_prefix, executor, part_bytes: int = DEFAULT_PART_BYTES,
                      text_column: str = "text", merge: bool = False, log=None, force: bool = False) -> dict:
    """Tokenize the kept shards of a curation output into the dataset of parts ``output_prefix/``. A folder
    ``output_prefix/`` holding files Quarry did not write (and with ``merge`` an ``output_prefix.bin/.idx/.json``
    Quarry did not write) is refused unless ``force`` (:func:`pretrain.data.tokenize.foreign_output_problem`)."""
    from curate.lock import OutputLock
    from pretrain.data.tokenize import READER_VERSION, foreign_output_problem, output_prefix_problem
    from pretrain.data.tokenizer import load_tokenizer

    log = log or (lambda msg: print(msg, file=sys.stderr))
    if part_bytes <= 0:
        raise ValueError(f"part bytes must be positive, got {part_bytes}")
    problem = output_prefix_problem(output_prefix, parts=True, merge=merge) or \
        foreign_output_problem(output_prefix, parts=True, merge=merge, force=force)
    if problem:
        raise ValueError(problem)
    shards = manifest_entries(input_dir)
    tokenizer = load_tokenizer(tokenizer_path)
    dtype = optimal_dtype(tokenizer.vocab_size)
    folder = Path(os.fspath(output_prefix)).absolute()  # tasks on other nodes may run in another directory
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} exists and is not a folder: a dataset of parts is a folder; choose another "
                         "--output-prefix")
    folder.mkdir(parents=True, exist_ok=True)
    job = {"version": JOB_VERSION, "reader": READER_VERSION, "tokenizer_sha256": tokenizer.sha256(),
           "specials": tokenizer.specials(), "dtype": dtype.str, "text_column": text_column, "part_bytes": part_bytes}
    job_key = _digest(job)
    t0 = time.perf_counter()
    with OutputLock(folder) as lock:
        if lock.stale:
            log(f"taking over the lock of a run that is gone ({lock.stale.get('pid')} on {lock.stale.get('host')})")
        _claim(folder, job_key, job, log)
        groups = group_shards(shards, part_bytes)
        specials = tuple(sorted(tokenizer.specials().items()))
        tasks = [PartTask(i, _digest([job_key, [(s.name, s.rows, s.sha256) for s in g]]), tuple(g), str(folder),
                          str(Path(tokenizer.model_path).absolute()), specials, dtype.str, text_column)
                 for i, g in enumerate(groups)]
        plan_key = _digest([t.key for t in tasks])
        done = _up_to_date(folder, plan_key, log)
        if done is None:
            _remove_stale_merge(folder, log)
            done = _run_tasks(folder, tasks, executor, plan_key, job, log, input_shards(shards))
        else:
            log(f"{folder}/ is up to date ({len(tasks)} parts)")
            done = _record_input_shards(folder, done, input_shards(shards), log)
        stats = dict(done["stats"])
    if merge:
        stats["merged"] = _merge(folder, log)
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return stats


def _up_to_date(folder: Path, plan_key: str, log) -> dict | None:
    """parts.json when it is this plan's and every part's files are the sizes it records; None (run the tasks:
    those whose files are intact are kept) otherwise, saying why when parts.json or a part is damaged."""
    if not parts_index_path(folder).exists():
        return None
    try:
        record = read_parts_index(folder)
    except ValueError as e:
        log(f"{e}: tokenizing again what is needed")
        return None
    if record.get("plan_key") != plan_key:
        return None
    bad = check_part_files(folder, record)
    if bad is not None:
        log(f"{folder}/{PARTS_INDEX}: {bad}: tokenizing that part again")
        return None
    return record


def _record_input_shards(folder: Path, record: dict, sources: list[str], log) -> dict:
    """An up-to-date ``parts.json`` written before records named their shards gets ``input_shards`` (which a blend
    compares), atomically, nothing tokenized again; and so does ``PREFIX.json`` of a ``--merge`` of these very parts,
    with the ``parts_sha256`` of the new ``parts.json`` (else the merged files would read as stale)."""
    if isinstance(record.get("input_shards"), list):
        return record
    index = parts_index_path(folder)
    old_sha = hashlib.sha256(index.read_bytes()).hexdigest()
    kept = {k: v for k, v in record.items() if k not in ("format", "version", "dtype", "documents", "tokens", "parts")}
    record = write_parts_index(folder, record["dtype"], record["parts"], {**kept, "input_shards": sources})
    log(f"{index}: the curated shards it was tokenized from recorded (a blend compares them)")
    merged_path = Path(f"{folder}.json")
    try:
        merged = json_files.read_json(merged_path)
    except (OSError, ValueError):
        return record
    if isinstance(merged, dict) and merged.get("parts_sha256") == old_sha:
        new_sha = hashlib.sha256(index.read_bytes()).hexdigest()
        with atomic_file(merged_path) as f:
            f.write(json.dumps({**merged, "parts_sha256": new_sha, **({"input_shards": sources} if sources else {})},
                               indent=2).encode())
    return record


def _run_tasks(folder: Path, tasks: list[PartTask], executor, plan_key: str, job: dict, log,
               sources: list[str]) -> dict:
    parts_index_path(folder).unlink(missing_ok=True)  # the dataset is whole again only when every part is there
    markers = folder / MARKERS
    results: dict[int, dict] = {}
    for t in tasks:
        m = _read_marker(markers / f"{t.name}.json", t.key, folder)
        if m is not None:
            results[t.index] = m
    _remove_parts(folder, keep={t.name for t in tasks if t.index in results})
    pending = [t for t in tasks if t.index not in results]
    if results:
        log(f"resuming: {len(results)} of {len(tasks)} parts already done")

    def finished(stats: dict) -> None:
        results[stats["task"]] = stats
        with atomic_file(markers / f"{stats['name']}.json") as f:
            f.write(json.dumps(stats).encode())

    markers.mkdir(exist_ok=True)
    executor.map(tokenize_part, pending, desc="tokenize", on_result=finished)
    for tmp in folder.glob(".*.tmp"):  # left by a task whose node was lost (it ran again elsewhere)
        tmp.unlink(missing_ok=True)
    ordered = [results[t.index] for t in tasks]
    parts = [{k: r[k] for k in ("name", "documents", "tokens", "bin_bytes", "idx_bytes", "rows", "shards")}
             for r in ordered]
    stats = {key: sum(r[key] for r in ordered) for key in ("documents", "tokens", "rows", "errors", "empty",
                                                           "text_bytes")}
    from pretrain.data.tokenize import NAMED_SKIPPED

    stats["skipped"] = [e for r in ordered for e in r.get("skipped", [])][:NAMED_SKIPPED]
    stats.update(dtype=str(np.dtype(job["dtype"])), parts=len(parts),
                 worker_cpu_seconds=round(sum(results[t.index].get("cpu_seconds", 0) for t in pending), 3))
    return write_parts_index(folder, job["dtype"], parts, {"plan_key": plan_key, "job_key": _digest(job),
                                                           "stats": stats, "input_shards": sources})


def _remove_stale_merge(folder: Path, log) -> None:
    """``PREFIX.bin/.idx`` merged from parts that are about to be rewritten (a blend would read them first)."""
    record_path = Path(f"{folder}.json")
    try:
        merged = "parts_sha256" in json_files.read_json(record_path)
    except (OSError, ValueError, TypeError):
        merged = False
    if merged:
        log(f"{folder}.bin/.idx were merged from the parts being rewritten: removed (--merge writes them again)")
        for path in (data_file_path(folder), index_file_path(folder), record_path):
            Path(path).unlink(missing_ok=True)


def _merged_intact(folder: Path, prefix: str) -> bool:
    """``PREFIX.bin`` holds the parts' tokens (its size) and ``PREFIX.idx`` is a regular file: not cut short."""
    record = read_parts_index(folder)
    try:
        return os.path.isfile(index_file_path(prefix)) and os.path.isfile(data_file_path(prefix)) and \
            os.path.getsize(data_file_path(prefix)) == record["tokens"] * np.dtype(record["dtype"]).itemsize
    except OSError:
        return False


def _merge(folder: Path, log) -> dict:
    """``PREFIX.bin/.idx`` from the parts, unless ``PREFIX.json`` says they were merged from these very parts."""
    from pretrain.data.parts import merge_parts
    from pretrain.data.tokenize import OUTPUT_FORMAT

    prefix = str(folder)
    record_path = Path(prefix + ".json")
    parts_sha = hashlib.sha256(parts_index_path(folder).read_bytes()).hexdigest()
    try:
        record = json_files.read_json(record_path)
    except (OSError, ValueError):
        record = {}
    if isinstance(record, dict) and record.get("parts_sha256") == parts_sha:
        if _merged_intact(folder, prefix) and isinstance(record.get("stats"), dict):
            log(f"{prefix}.bin/.idx are up to date")
            return record["stats"]
        log(f"{prefix}.bin/.idx are not what was merged (missing, cut short or changed): merged again")
    stats = merge_parts(folder, prefix)
    sources = read_parts_index(folder).get("input_shards")
    with atomic_file(record_path) as f:
        f.write(json.dumps({"format": OUTPUT_FORMAT, "parts_sha256": parts_sha, "merged_from": f"{prefix}/{PARTS_INDEX}",
                            "stats": stats, **({"input_shards": sources} if sources else {})}, indent=2).encode())
    return stats
