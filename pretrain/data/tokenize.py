"""``pretrain tokenize``: curated shards to a Megatron-compatible ``<prefix>.bin`` + ``<prefix>.idx``.

Each document becomes one sequence: its token ids followed by EOD. The work is cut into tasks (one Arrow
record batch or Parquet row group of one shard each); every task writes a partial dataset under
``<prefix>.parts/`` (``.bin``, ``.idx``, then a ``.json`` of counts that marks it done) and the parts are
merged in task order at the end, so the output does not depend on the number of workers.
A killed run resumes: done tasks are kept (when the input manifest, tokenizer and settings are the
same), half-written files are ignored, and the rerun gives byte-identical files.
Documents that cannot be encoded (not a string, or an encoder error) are counted and skipped; empty
documents are counted and skipped. ``<prefix>.json`` records the counts and a key of the inputs (manifest,
tokenizer, settings, and the version of the rules that read a shard's text, ``READER_VERSION``): a rerun with the
same inputs finds the output up to date and does nothing (but add the ``input_shards`` that records written before
them lack, which a blend compares); an output of older reading rules is tokenized again.

The output never replaces files Quarry did not write: an existing ``PREFIX.bin/.idx/.json`` without Quarry's
record ``PREFIX.json`` beside it is refused unless ``force`` (``--force``); a ``PREFIX.parts/`` scratch folder
holding files Quarry did not write is always refused (it is removed when the run ends).
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
from curate.lock import LOCK_FILE
from pretrain.data.indexed import (
    IndexedDataset, IndexedDatasetBuilder, atomic_file, data_file_path, index_file_path, optimal_dtype,
    write_index,
)

ENCODE_BATCH = 256  # documents per SentencePiece call
CHUNK_DOCS = 2048  # documents encoded and written at a time within a task
JOB_VERSION = 1
# The rules that turn a shard's text column into documents (read_task_column, tokenizer.text_array,
# encode_documents). Part of every output's key (one file, and each part of --parts), so that outputs written under
# older rules count as stale and are tokenized again. Bump it whenever those rules change what a shard reads as.
#   1: binary text columns were all encode errors (every document skipped, exit 0)
#   2: binary columns decoded as UTF-8, string_view and dictionary columns read (b05eb25); since then the column
#      is read by curate.readers.arrow_text (run-end-encoded columns accepted, and a string row that is not UTF-8
#      null): not a bump, since no output was ever written from such a column (both stopped the run)
READER_VERSION = 2
OUTPUT_FORMAT = "quarry-tokenize"  # PREFIX.json, the record of a one-file run or of --merge


@dataclass(frozen=True)
class Task:
    index: int
    shard: str
    unit: int  # record batch (Arrow IPC) or row group (Parquet)
    check: object = None  # the shard's ManifestShard on its first task: sha256 and rows checked before reading


def plan_tasks(shards: list) -> list[Task]:
    """One task per record batch / row group of every shard, in manifest order (shards: paths, or
    ``ManifestShard`` entries, whose first task checks the shard against its manifest entry)."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    tasks = []
    for shard in shards:
        entry = shard if hasattr(shard, "sha256") else None
        path = entry.path if entry else str(shard)
        try:
            if path.endswith(".parquet"):
                units = pq.ParquetFile(path).metadata.num_row_groups
            else:
                with ipc.open_file(path) as reader:
                    units = reader.num_record_batches
        except (ValueError, OSError) as e:  # pyarrow's ArrowInvalid / ArrowIOError name no file
            if isinstance(e, FileNotFoundError):
                raise
            if entry is not None:  # cut short or replaced after curation: say so, naming the shard
                from pretrain.data.manifest_check import verify_shard

                verify_shard(entry)
            raise ValueError(f"shard {path} is damaged or not an Arrow/Parquet file ({e})") from e
        for u in range(units):
            tasks.append(Task(len(tasks), path, u, entry if u == 0 else None))
        if entry is not None and units == 0 and entry.rows:
            raise ValueError(f"shard {entry.name} holds no record batch, its manifest entry says {entry.rows:,} rows")
    return tasks


def read_task_column(task: Task, text_column: str = "text"):
    """The task's text column (an Arrow array) and its UTF-8 size in bytes."""
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from curate.shards import checked

    if task.shard.endswith(".parquet"):
        pf = pq.ParquetFile(task.shard)
        names = pf.schema_arrow.names
        data = pf.read_row_group(task.unit, columns=[text_column]) if text_column in names else None
    else:
        with ipc.open_file(task.shard) as reader:
            data = reader.get_batch(task.unit)
        names = data.schema.names
    if text_column not in names:
        raise ValueError(f"{task.shard} has no {text_column!r} column (columns: {names})")
    from pretrain.data.tokenizer import text_array

    column = text_array(checked(data.column(text_column), task.shard), task.shard, text_column)
    nbytes = (pc.sum(pc.binary_length(column)).as_py() or 0) if len(column) else 0
    return column, int(nbytes)


def read_task_texts(task: Task, text_column: str = "text") -> tuple[list, int]:
    """The task's texts (as Python objects) and their UTF-8 size in bytes."""
    column, nbytes = read_task_column(task, text_column)
    return column.to_pylist(), nbytes


# ----------------------------------------------------------------------------------------------- worker

_TOKENIZER = None


def _worker_init(model_path: str, specials: dict, driver_pid: int) -> None:
    global _TOKENIZER
    import signal

    from curate.executors.driver_watch import end_with_driver

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle (one line, the pool ended)
    end_with_driver(driver_pid)  # and a driver killed outright leaves no worker behind
    from pretrain.data.tokenizer import Tokenizer

    _TOKENIZER = Tokenizer(model_path, specials)


NAMED_SKIPPED = 10  # skipped documents named per task (each shard's batch) and in the output's record


def encode_documents(tokenizer, texts: list) -> tuple[list[list[int]], dict]:
    """Token ids (EOD appended) of the encodable texts that give at least one token, and counts of the rest
    (``errors``: null, not text, or an encoder error; ``empty``: an empty text, or one the tokenizer's
    normalization leaves nothing of), with ``skipped``: (position in ``texts``, "encode_error" or "empty") of
    each of those, in order."""
    good, where, skipped = [], [], []
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            skipped.append((i, "encode_error"))
        elif not t:
            skipped.append((i, "empty"))
        else:
            good.append(t)
            where.append(i)
    out: list[tuple[int, list[int]]] = []
    for i in range(0, len(good), ENCODE_BATCH):
        batch, at = good[i:i + ENCODE_BATCH], where[i:i + ENCODE_BATCH]
        try:
            out.extend(zip(at, tokenizer.encode_batch(batch, num_threads=1)))
        except Exception:  # find the culprit(s): encode one by one
            for k, t in zip(at, batch):
                try:
                    out.append((k, tokenizer.encode(t)))
                except Exception:
                    skipped.append((k, "encode_error"))
    eod = tokenizer.eod_id
    kept = []
    for k, ids in out:
        if ids:
            ids.append(eod)
            kept.append(ids)
        else:  # a text the tokenizer normalizes to nothing (zero-width spaces) is empty
            skipped.append((k, "empty"))
    skipped.sort()
    errors = sum(why == "encode_error" for _, why in skipped)
    return kept, {"errors": errors, "empty": len(skipped) - errors, "skipped": skipped}


def name_skipped(shard: str, unit: int, first_row: int, skipped: list, ids=None) -> list[dict]:
    """Up to ``NAMED_SKIPPED`` skipped documents of a shard's batch (row group), as the output's record names
    them: the shard, the batch, the row in it, the document's id where the shard has one, and why."""
    named = []
    for k, why in skipped[:NAMED_SKIPPED]:
        entry = {"shard": shard, "batch": unit, "row": first_row + k, "why": why}
        if ids is not None and first_row + k < len(ids):
            entry["id"] = str(ids[first_row + k])[:200]
        named.append(entry)
    return named


def read_ids(shard: str, unit: int):
    """The ``id`` column of a shard's batch (row group) as a list, or None (no such column, or unreadable):
    read only where the batch skipped a document."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    try:
        if shard.endswith(".parquet"):
            pf = pq.ParquetFile(shard)
            if "id" not in pf.schema_arrow.names:
                return None
            return pf.read_row_group(unit, columns=["id"]).column("id").to_pylist()
        with ipc.open_file(shard) as reader:
            batch = reader.get_batch(unit)
        return batch.column("id").to_pylist() if "id" in batch.schema.names else None
    except Exception:  # the name is a courtesy: the count stands without it
        return None


def add_skipped(stats: dict, shard: str, unit: int, first_row: int, skipped: list) -> None:
    """Name a chunk's skipped documents in a task's ``stats`` (up to ``NAMED_SKIPPED`` in all)."""
    room = NAMED_SKIPPED - len(stats["skipped"])
    if skipped and room > 0:
        stats["skipped"] += name_skipped(shard, unit, first_row, skipped[:room], read_ids(shard, unit))


def run_task(task: Task, parts_dir: str, dtype: str, text_column: str, tokenizer=None) -> dict:
    """Tokenize one task into ``parts_dir/<index>.{bin,idx}``; its ``.json`` (counts) is written last.
    Documents are encoded and written ``CHUNK_DOCS`` at a time, so memory stays bounded on big batches."""
    tokenizer = tokenizer or _TOKENIZER
    cpu0 = time.process_time()
    if task.check is not None:
        from pretrain.data.manifest_check import verify_shard

        verify_shard(task.check)
    column, nbytes = read_task_column(task, text_column)
    prefix = os.path.join(parts_dir, f"{task.index:06d}")
    stats = {"task": task.index, "documents": 0, "tokens": 0, "rows": len(column), "text_bytes": nbytes,
             "errors": 0, "empty": 0, "skipped": []}
    with IndexedDatasetBuilder(prefix, dtype, durable=False) as builder:  # parts: the merged output is fsynced
        for start in range(0, len(column), CHUNK_DOCS):
            ids, counts = encode_documents(tokenizer, column.slice(start, CHUNK_DOCS).to_pylist())
            add_skipped(stats, task.shard, task.unit, start, counts["skipped"])
            lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            total = int(lengths.sum())
            builder.add_documents(np.fromiter(itertools.chain.from_iterable(ids), dtype=np.dtype(dtype), count=total),
                                  lengths)
            stats["documents"] += len(ids)
            stats["tokens"] += total
            stats["errors"] += counts["errors"]
            stats["empty"] += counts["empty"]
    stats["cpu_seconds"] = round(time.process_time() - cpu0, 4)
    with atomic_file(prefix + ".json", durable=False) as f:
        f.write(json.dumps(stats).encode())
    return stats


def _run_task_star(args):
    return run_task(*args)


def _mp_context():
    """A fork server with the heavy modules preloaded: workers start in milliseconds and do not inherit
    the parent's threads (pyarrow, tqdm). As with any spawn/forkserver pool, a script that calls this
    needs the ``if __name__ == "__main__":`` guard."""
    import multiprocessing as mp

    if sys.platform == "win32":  # pragma: no cover
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["numpy", "pyarrow", "pyarrow.ipc", "pyarrow.parquet", "pyarrow.compute",
                                "sentencepiece", "pretrain.data.tokenize", "pretrain.data.tokenizer"])
    return ctx


# ----------------------------------------------------------------------------------------------- driver

def _sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def output_prefix_problem(prefix, parts: bool = False, merge: bool = False) -> str | None:
    """A message when ``prefix`` cannot name the output, checked at start (not after all the work): without
    ``parts`` (or with ``merge``) ``PREFIX.bin/.idx/.json`` are written, so the prefix must name files, not a
    folder (``dir/`` would write hidden ``dir/.bin``), in an existing folder, and none of them a folder. (Files
    there that Quarry did not write: :func:`foreign_output_problem`, which the library functions check.)"""
    from curate.write_guard import blocking_file

    prefix = os.fspath(prefix)
    if not prefix:
        return "--output-prefix is empty: give a path such as out/tokens/web"
    writes_files = merge or not parts
    if writes_files:
        folder_like = prefix.endswith(("/", os.sep)) or os.path.basename(prefix) in ("", ".", "..")
        if folder_like or (not parts and os.path.isdir(prefix)):
            base = prefix.rstrip("/" + os.sep) or prefix
            return (f"--output-prefix {prefix} names a folder, not a file prefix (it would write {prefix.rstrip('/')}"
                    f"/.bin); give a name inside it, e.g. {os.path.join(base, 'tokens')}")
        for suffix in (".bin", ".idx", ".json"):
            if os.path.isdir(prefix + suffix):
                return f"{prefix}{suffix} is a folder: move it away or give another --output-prefix"
    parent = os.path.dirname(os.path.abspath(prefix.rstrip("/" + os.sep) or prefix))
    above = blocking_file(parent)
    if above:
        return f"--output-prefix {prefix} lies below {above}, which is a file, not a folder"
    return None


# ----------------------------------------------------------------------------------------------- what is ours

def _is_sha256(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def output_record(prefix) -> dict | None:
    """``PREFIX.json`` when it is the record of a `pretrain tokenize` (a one-file run's, or ``--merge``'s, of this
    version or an older one), else None (missing, not a regular file, not JSON, or another file)."""
    path = os.fspath(prefix) + ".json"
    if not os.path.isfile(path):
        return None
    try:
        record = json_files.read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("stats"), dict):
        return None
    if record.get("format") == OUTPUT_FORMAT or _is_sha256(record.get("job_key")) or \
            (_is_sha256(record.get("parts_sha256")) and "merged_from" in record):
        return record
    return None


def _is_job_folder(folder: str) -> bool:
    """A folder that a `pretrain tokenize` made: its ``job.json`` holds a job key (``PREFIX.parts/`` of a one-file
    run, ``PREFIX/`` of --parts)."""
    try:
        record = json_files.read_json(os.path.join(folder, "job.json"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and _is_sha256(record.get("job_key"))


def _foreign_entries(folder: str, ours: tuple = ()) -> list[str]:
    """Entries of ``folder`` other than ``ours`` and the hidden ``.*.tmp`` files a killed run leaves."""
    return sorted(e for e in os.listdir(folder) if e not in ours and not (e.startswith(".") and e.endswith(".tmp")))


def foreign_output_problem(prefix, parts: bool = False, merge: bool = False, force: bool = False) -> str | None:
    """A message when a path this run writes (or removes) holds files Quarry did not write:

    - ``PREFIX.json`` that is not a tokenize record, or ``PREFIX.bin`` / ``PREFIX.idx`` without one beside them
      (a one-file run killed before its record keeps its ``PREFIX.parts/job.json``, which counts): refused unless
      ``force``;
    - a one-file run's scratch folder ``PREFIX.parts/`` that is not a folder, or holds entries without Quarry's
      ``job.json``: always refused (the run removes that folder when it ends; ``force`` does not make it ours);
    - with ``parts``, the folder ``PREFIX/`` holding entries without Quarry's ``job.json`` or ``parts.json``:
      refused unless ``force`` (the run removes the ``part-*`` files, ``parts.json`` and hidden ``.tmp`` files
      there)."""
    prefix = os.fspath(prefix)

    def again(n: int) -> str:
        them = "it" if n == 1 else "them"
        return f"move {them} away, give another --output-prefix, or pass --force to overwrite {them}"

    if merge or not parts:
        if not force:
            record = output_record(prefix)
            if record is None and os.path.lexists(prefix + ".json"):
                return f"{prefix}.json exists and is not the record of a `pretrain tokenize` output: {again(1)}"
            if record is None:
                killed_run = not parts and os.path.isdir(prefix + ".parts") and _is_job_folder(prefix + ".parts")
                existing = [prefix + s for s in (".bin", ".idx") if os.path.lexists(prefix + s)]
                if existing and not killed_run:
                    return (f"{' and '.join(existing)} exist{'s' if len(existing) == 1 else ''} without the record "
                            f"{prefix}.json that `pretrain tokenize` writes beside its outputs: not written by "
                            f"Quarry (or by a merge killed before its record); {again(len(existing))}")
    if not parts:
        scratch = prefix + ".parts"
        if os.path.lexists(scratch):
            if not os.path.isdir(scratch) or os.path.islink(scratch):
                return (f"{scratch} exists and is not a folder: tokenize keeps its unfinished tasks there; move it "
                        "away or give another --output-prefix")
            foreign = [] if _is_job_folder(scratch) else _foreign_entries(scratch, (LOCK_FILE,))
            if foreign:
                return (f"{scratch}/ holds files Quarry did not write ({_some(foreign)}): tokenize keeps its "
                        "unfinished tasks there and removes the folder when done; move it away or give another "
                        "--output-prefix")
    elif os.path.isdir(prefix) and not force and not _is_job_folder(prefix):
        from pretrain.data.parts import PARTS_FORMAT, parts_index_path

        try:
            ours = json_files.read_json(parts_index_path(prefix)).get("format") == PARTS_FORMAT
        except (OSError, ValueError, AttributeError):
            ours = False
        foreign = _foreign_entries(prefix, ("run.lock", "_tasks"))
        if foreign and not ours:
            return (f"{prefix}/ holds files Quarry did not write ({_some(foreign)}): a dataset of parts is written "
                    f"there (its part-* files, parts.json and job.json replaced); {again(2)}")
    return None


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _outputs_match(prefix: str, record: dict, dtype) -> bool:
    """``PREFIX.bin`` holds the tokens the record counts, and ``PREFIX.idx`` is a regular file (an output cut short
    or replaced since is not up to date)."""
    tokens = record["stats"].get("tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        return False
    try:
        return os.path.isfile(index_file_path(prefix)) and os.path.isfile(data_file_path(prefix)) and \
            os.path.getsize(data_file_path(prefix)) == tokens * np.dtype(dtype).itemsize
    except OSError:
        return False


def _read_task_marker(parts: Path, task: Task) -> dict | None:
    """A done task's counts from ``PREFIX.parts/NNNNNN.json``, or None (the task is run again) when the marker is
    damaged or its files do not hold what it counts."""
    from pretrain.data.parts import marker_holds

    prefix = parts / f"{task.index:06d}"
    try:
        m = json_files.read_json(f"{prefix}.json")
        if not isinstance(m, dict) or m.get("task") != task.index:
            return None
        if not marker_holds(prefix, m, ("documents", "tokens", "rows", "text_bytes", "errors", "empty")):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return m


def tokenize_curated(input_dir, tokenizer_path, output_prefix, workers: int = 1, text_column: str = "text",
                     progress: bool = True, log=None, force: bool = False) -> dict:
    """Tokenize the kept shards of a curation output into ``output_prefix.{bin,idx}``; returns counts. Existing
    ``output_prefix.bin/.idx/.json`` that Quarry did not write are refused unless ``force``."""
    from pretrain.data.manifest_check import manifest_entries
    from pretrain.data.tokenizer import load_tokenizer

    log = log or (lambda msg: print(msg, file=sys.stderr))
    problem = output_prefix_problem(output_prefix) or foreign_output_problem(output_prefix, force=force)
    if problem:
        raise ValueError(problem)
    input_dir = Path(input_dir)
    manifest = input_dir / "manifest.json"
    entries = manifest_entries(input_dir)  # no shard twice, each there with rows and sha256
    tokenizer = load_tokenizer(tokenizer_path)
    dtype = optimal_dtype(tokenizer.vocab_size)
    shards = [Path(e.path) for e in entries]
    prefix = os.fspath(output_prefix)
    job = {"version": JOB_VERSION, "reader": READER_VERSION, "manifest_sha256": _sha256_file(manifest),
           "shards": [str(s.resolve()) for s in shards], "tokenizer_sha256": tokenizer.sha256(),
           "specials": tokenizer.specials(), "dtype": dtype.str, "text_column": text_column}
    job_key = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()
    scratch = Path(prefix + ".parts")
    lock = _lock_scratch(scratch)
    try:
        return _tokenize_locked(prefix, input_dir, manifest, entries, tokenizer, dtype, job, job_key, workers,
                                text_column, progress, log)
    finally:
        lock.release()
        try:  # an up-to-date rerun (or a failure before any task) leaves the folder empty: not left behind
            scratch.rmdir()
        except OSError:
            pass


def _lock_scratch(scratch: Path):
    """The run lock of ``PREFIX.parts/`` (``curate.lock.OutputLock``, as ``--parts`` takes on ``PREFIX/``): two runs
    on one prefix would share the scratch folder, one resuming the other's half-done tasks and renaming files from
    under it. Retried when a run finishing meanwhile removes the folder between its ``mkdir`` and the lock."""
    from curate.lock import OutputLock

    for _ in range(10):
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            return OutputLock(scratch).acquire()
        except FileNotFoundError:
            continue
    raise ValueError(f"could not lock {scratch}: it keeps being removed by another process")


def _tokenize_locked(prefix, input_dir, manifest, entries, tokenizer, dtype, job, job_key, workers, text_column,
                     progress, log) -> dict:
    """The run itself, under the lock of ``PREFIX.parts/``."""
    from pretrain.data.manifest_check import input_shards

    done_path = Path(prefix + ".json")
    done = output_record(prefix)
    if done is not None and done.get("job_key") == job_key and _outputs_match(prefix, done, dtype):
        log(f"{prefix}.bin/.idx are up to date")
        if not isinstance(done.get("input_shards"), list):  # written before records named their shards
            with atomic_file(done_path) as f:
                f.write(json.dumps({**done, "input_shards": input_shards(entries)}, indent=2).encode())
            log(f"{done_path}: the curated shards it was tokenized from recorded (a blend compares them)")
        return done["stats"]
    if done is not None and isinstance(done.get("job_key"), str) and done.get("job_key") != job_key:
        log(f"{prefix}.bin/.idx were written from other inputs, another tokenizer or settings, or by an older "
            "version of the reading rules: tokenizing again")

    parts = _parts_folder(prefix, job_key, job)
    tasks = plan_tasks(entries)
    results: dict[int, dict] = {}
    for t in tasks:
        done = _read_task_marker(parts, t)
        if done is not None:
            results[t.index] = done
    pending = [t for t in tasks if t.index not in results]
    total_rows = sum(e.get("rows", 0) for e in json_files.read_json(manifest)["shards"])
    if results:
        log(f"resuming: {len(results)} of {len(tasks)} tasks already done")
    t0 = time.perf_counter()
    bar = _progress(total_rows, sum(r["rows"] for r in results.values()), progress)
    try:
        _run_pending(pending, parts, dtype, text_column, tokenizer, workers, results, bar)
    finally:
        bar.close()

    _check_rows(entries, tasks, results)
    stats = merge_parts(parts, tasks, prefix, dtype)
    for key in ("rows", "errors", "empty", "text_bytes"):
        stats[key] = sum(results[t.index][key] for t in tasks)
    stats["skipped"] = [e for t in tasks for e in results[t.index].get("skipped", [])][:NAMED_SKIPPED]
    stats["worker_cpu_seconds"] = round(sum(results[t.index].get("cpu_seconds", 0) for t in pending), 3)
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    with atomic_file(done_path) as f:
        f.write(json.dumps({"format": OUTPUT_FORMAT, "job_key": job_key, "reader": READER_VERSION, "stats": stats,
                            "tokenizer": tokenizer.model_path, "tokenizer_sha256": job["tokenizer_sha256"],
                            "input": str(input_dir), "input_shards": input_shards(entries)}, indent=2).encode())
    shutil.rmtree(parts)
    return stats


def _check_rows(entries: list, tasks: list[Task], results: dict) -> None:
    """Every shard was read whole: its tasks' rows add up to its manifest entry's."""
    rows: dict[str, int] = {}
    for t in tasks:
        rows[t.shard] = rows.get(t.shard, 0) + results[t.index]["rows"]
    for e in entries:
        if rows.get(e.path, 0) != e.rows:
            raise ValueError(f"shard {e.name}: read {rows.get(e.path, 0):,} rows, its manifest entry says {e.rows:,}")


def _parts_folder(prefix: str, job_key: str, job: dict) -> Path:
    """``PREFIX.parts/`` with ``job.json`` for this job: the done parts of the same job are kept, leftovers of
    another input or tokenizer removed, and half-written files of a killed run deleted."""
    parts = Path(prefix + ".parts")
    parts.mkdir(parents=True, exist_ok=True)
    job_file = parts / "job.json"
    if job_file.is_file():
        try:
            old = json_files.read_json(job_file).get("job_key")
        except (ValueError, AttributeError):  # damaged, or not an object
            old = None
        if old != job_key:  # leftovers of another input or tokenizer: start over (the run's lock stays)
            for entry in parts.iterdir():
                if entry.name != LOCK_FILE:
                    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    if not job_file.is_file():
        with atomic_file(job_file) as f:
            f.write(json.dumps({"job_key": job_key, **job}, indent=2).encode())
    for tmp in parts.glob(".*.tmp"):  # half-written files of a killed run
        tmp.unlink()
    return parts


def _run_pending(pending: list[Task], parts: Path, dtype, text_column: str, tokenizer, workers: int,
                 results: dict, bar) -> None:
    """Run the tasks not done yet, in this process or a pool; their counts go into ``results``."""
    if workers <= 1 or len(pending) <= 1:
        for t in pending:
            results[t.index] = run_task(t, str(parts), dtype.str, text_column, tokenizer)
            bar.update(results[t.index]["rows"])
        return
    with _mp_context().Pool(min(workers, len(pending)), initializer=_worker_init,
                            initargs=(tokenizer.model_path, tokenizer.specials(), os.getpid())) as pool:
        jobs = [(t, str(parts), dtype.str, text_column) for t in pending]
        for stats in pool.imap_unordered(_run_task_star, jobs):
            results[stats["task"]] = stats
            bar.update(stats["rows"])


def merge_parts(parts: Path, tasks: list[Task], prefix: str, dtype) -> dict:
    """Concatenate the partial datasets in task order into ``prefix.bin`` and ``prefix.idx``."""
    lengths, doc_counts = [], []
    bin_tmp = Path(prefix + ".bin.merge.tmp")
    try:
        with open(bin_tmp, "wb") as out:
            for t in tasks:
                part = IndexedDataset(parts / f"{t.index:06d}")
                if part.dtype != np.dtype(dtype):
                    raise ValueError(f"part {t.index} holds {part.dtype}, expected {dtype}")
                lengths.append(np.array(part.sequence_lengths))
                doc_counts.append(np.diff(part.document_indices))
                part.close()
                with open(data_file_path(parts / f"{t.index:06d}"), "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(bin_tmp, 0o644)
        os.replace(bin_tmp, data_file_path(prefix))
    except BaseException:  # a full disk, a bad part, PREFIX.bin a folder, Ctrl-C: no half-written merge left
        bin_tmp.unlink(missing_ok=True)
        raise
    seq_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
    per_doc = np.concatenate(doc_counts) if doc_counts else np.zeros(0, np.int64)
    documents = np.concatenate([[0], np.cumsum(per_doc)]).astype(np.int64)
    write_index(index_file_path(prefix), dtype, seq_lengths, documents)
    return {"documents": int(len(per_doc)), "tokens": int(seq_lengths.sum(dtype=np.int64)),
            "dtype": str(np.dtype(dtype)), "tasks": len(tasks)}


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass


def _progress(total: int, initial: int, enabled: bool):
    """A tqdm bar on a terminal; none when stderr is a file or a pipe (a bar there is one long line of \\r)."""
    if not enabled or not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="doc", desc="tokenize", file=sys.stderr,
                dynamic_ncols=True, mininterval=0.5)
