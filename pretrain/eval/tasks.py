"""Evaluation tasks: what a task is (``TaskSpec``), how it is named on the command line and in TOML, and its
items read from a local file with every item checked.

Kinds and their files (JSONL, one item per line; ``.gz`` / ``.zst`` allowed):
- ``bpb``: ``{"text": ...}`` per document (or a ``.txt`` file: one document); language modelling.
- ``cloze``: ``{"text": ...}``; the target is the last word (after the last space), as LAMBADA.
- ``choice``: ``{"context": ..., "choices": [...], "label": index}``; multiple choice.

A file is read as a stream, one line at a time (lines end at ``\\n`` only, a ``\\r`` before it dropped, a UTF-8
BOM at the start dropped: what the ``json`` loader lm-eval reads through does; ``str.splitlines`` also cut lines
at U+2028, U+0085, ``\\x0c``... that JSON strings may hold unescaped). An item that is not of its kind (a line
that is not JSON, a missing key, a label out of range, ...) or that a caller's ``check`` refuses (one the model
cannot score) is set aside and counted (``TaskItems.skipped``, with the first reasons as ``path:line: why``); a
file with no valid item at all is an ``EvalDataError`` naming the file and its first problem. ``limit`` counts
the items kept, and reading stops there. Memory is bounded: at most ``MAX_ITEM_BYTES`` per line (or ``.txt``
document), ``MAX_ITEMS`` items per task, ``MAX_CHOICES`` choices per item, ``MAX_FILE_BYTES`` read (decompressed;
a ``.gz`` file's bytes after its gzip data, other than NUL padding, an error). Nothing is downloaded.
"""
from __future__ import annotations

import codecs
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from curate import json_files
from curate.config import ConfigError
from curate.file_kind import file_name_key, file_problem

KINDS = ("bpb", "cloze", "choice")
SPEC_KEYS = ("name", "kind", "path", "shots", "stride", "limit")
MAX_FILE_BYTES = 1 << 30  # an eval file is small: refuse to read more than 1 GiB of it
MAX_ITEM_BYTES = 16 << 20  # one JSONL line or one .txt document: a longer one is set aside unread (a bpb document
                           # is tokenized whole, as lm-eval does: about 40 bytes of memory per token while it is)
MAX_ITEMS = 1_000_000  # items one task holds in memory: more is an error (set a limit, or split the file)
MAX_CHOICES = 1_000  # choices of one item (lm-eval's tasks have at most a few dozen): more is set aside; each choice
                     # is a request (its context encoded and scored once per choice)
_CHUNK = 1 << 20
# A task name becomes file names (NAME.jsonl, NAME.yaml), an lm-eval task name and a word of a printed command:
# only these characters, so that none of them can break (or inject into) any of those.
TASK_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_TASK_NAME_RE = re.compile(TASK_NAME_PATTERN)
TASK_NAME_RULE = ("1-128 characters: letters, digits, '.', '_', '-', starting with a letter or digit "
                  f"(pattern {TASK_NAME_PATTERN})")


class EvalDataError(ValueError):
    pass


@dataclass
class TaskSpec:
    name: str
    kind: str  # bpb | cloze | choice
    path: str
    shots: int = 0  # choice only: examples from the same file before each item
    stride: int = 0  # bpb only: 0 = lm-eval's disjoint rolling windows; N = overlapping windows predicting N tokens
    limit: int = 0  # 0: every item; N: the first N valid items (with a model: the first N it can score)


@dataclass
class TaskItems:
    spec: TaskSpec
    items: list[dict]
    skipped: int = 0
    problems: list[str] = field(default_factory=list)  # the first few reasons, "path:line: why"
    lines: list[int] = field(default_factory=list)  # the 1-based line of each item in its file

    def where(self, i: int) -> str:
        """``path:line`` of item ``i``."""
        path = Path(self.spec.path)
        return f"{path}:{self.lines[i]}" if i < len(self.lines) else f"{path}: item {i + 1}"


def _check_spec(spec: TaskSpec, where: str) -> TaskSpec:
    if spec.kind not in KINDS:
        raise ConfigError(f"{where}: kind = {spec.kind!r}; choose one of {', '.join(KINDS)}")
    if not is_valid_task_name(spec.name):
        raise ConfigError(f"{where}: task name {spec.name!r} is not allowed; a task name is {TASK_NAME_RULE}")
    for key in ("shots", "stride", "limit"):
        v = getattr(spec, key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ConfigError(f"{where}: {key} = {v!r} must be an integer >= 0")
    if spec.shots and spec.kind != "choice":
        raise ConfigError(f"{where}: shots is for kind 'choice' only (task {spec.name!r} is {spec.kind!r})")
    if spec.stride and spec.kind != "bpb":
        raise ConfigError(f"{where}: stride is for kind 'bpb' only (task {spec.name!r} is {spec.kind!r})")
    problem = file_problem(spec.path)
    if problem:
        raise ConfigError(f"{where}: eval file {spec.path} {problem} (task {spec.name!r})")
    return spec


def is_valid_task_name(name) -> bool:
    """True for a name matching ``TASK_NAME_PATTERN`` (the whole string: no newline, space, ':', '#', '/')."""
    return isinstance(name, str) and _TASK_NAME_RE.fullmatch(name) is not None


def _default_name(path: str) -> str:
    """The task name from a file name: its stem less .gz/.zst/.jsonl/.json/.txt, every character outside
    ``[A-Za-z0-9._-]`` replaced by '_' (``my prose: v2 #1.jsonl`` -> ``my_prose__v2__1``), leading '.', '_', '-'
    dropped, at most 128 characters; ``task`` when nothing is left."""
    name = Path(path).name
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".txt"):
        name = name.removesuffix(suffix)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip("._-")[:128]
    return name or "task"


def parse_task_arg(text: str) -> TaskSpec:
    """``KIND:PATH[:NAME]`` (the command line's ``--task``) -> a checked TaskSpec."""
    kind, sep, rest = text.partition(":")
    if not sep or not rest:
        raise ConfigError(f"--task {text!r}: expected KIND:PATH[:NAME] with KIND one of {', '.join(KINDS)}, "
                          f"e.g. --task bpb:evals/prose.jsonl:prose")
    path, name = rest, None
    if ":" in rest and not os.path.exists(rest):  # (os.path: False, not OSError, for a name too long for the OS)
        path, _, name = rest.rpartition(":")
    return _check_spec(TaskSpec(name=name or _default_name(path), kind=kind, path=path), f"--task {text!r}")


def task_specs_from_tables(tables, where: str) -> list[TaskSpec]:
    """``[[tasks]]`` tables (a list of dicts) -> checked TaskSpecs with distinct names."""
    if not isinstance(tables, list):
        raise ConfigError(f"{where} must be a list of tables ([[...]])")
    specs = []
    for i, t in enumerate(tables):
        at = f"{where}[{i}]"
        if not isinstance(t, dict):
            raise ConfigError(f"{at} must be a table with kind and path")
        unknown = sorted(set(t) - set(SPEC_KEYS))
        if unknown:
            raise ConfigError(f"{at}: unknown key(s) {', '.join(unknown)}; known: {', '.join(SPEC_KEYS)}")
        for key in ("kind", "path"):
            if not isinstance(t.get(key), str):
                raise ConfigError(f"{at}: {key} (a string) is required")
        spec = TaskSpec(name=t.get("name") or _default_name(t["path"]), kind=t["kind"], path=t["path"],
                        shots=t.get("shots", 0), stride=t.get("stride", 0), limit=t.get("limit", 0))
        specs.append(_check_spec(spec, at))
    check_distinct_names(specs, where)
    return specs


def check_distinct_names(specs: list[TaskSpec], where: str) -> None:
    """Task names must differ, and not only in case: a name becomes files (``NAME.yaml``, ``NAME.jsonl`` of
    ``--write-lm-eval-tasks``), and ``Ok.yaml`` and ``ok.yaml`` are one file on a case-insensitive file system
    (macOS, Windows)."""
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{where}: task names must differ; repeated: {', '.join(dup)} (set name = ..., or "
                          f"--task KIND:PATH:NAME)")
    seen: dict[str, str] = {}
    for n in names:
        other = seen.setdefault(file_name_key(n), n)
        if other != n:
            raise ConfigError(f"{where}: task names {other!r} and {n!r} differ only in case: their files "
                              f"({other}.yaml, {n}.yaml) would be one file on a case-insensitive file system "
                              f"(macOS, Windows); rename one (set name = ..., or --task KIND:PATH:NAME)")


def _open_stream(path: Path):
    """``path`` opened for reading as bytes, decompressed (``.gz`` / ``.zst``): a regular file only, of at most
    ``MAX_FILE_BYTES``."""
    problem = file_problem(path)
    if problem:
        raise EvalDataError(f"{path}: eval file {problem}")
    f = os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")  # a FIFO now: no wait
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):  # replaced since it was looked at
        f.close()
        raise EvalDataError(f"{path}: eval file is not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        f.close()
        raise EvalDataError(f"{path}: {st.st_size} bytes; an eval file may hold at most {MAX_FILE_BYTES} bytes")
    if path.suffix == ".gz":
        return _Gunzip(f, path, st.st_size), f
    if path.suffix == ".zst":
        import zstandard

        try:
            check_zstd_frames(f, path, st.st_size)
        except BaseException:
            f.close()
            raise
        return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True), f
    return f, f


_ZSTD_MAGIC, _SKIPPABLE = 0xFD2FB528, 0x184D2A50  # a frame's magic number; a skippable frame's (low 4 bits free)


def check_zstd_frames(f, path: Path, size: int) -> None:
    """Walk a ``.zst`` file's frames and blocks by their headers (no decompression; the file position is put back
    to 0): an ``EvalDataError`` where the file ends inside a frame (truncated: the decompressing reader would stop
    there without a word, and score the items before the cut) or holds bytes after its frames that are not one."""
    def need(n: int, at: int) -> bytes:
        f.seek(at)
        b = f.read(n)
        if len(b) < n:
            raise EvalDataError(f"{path}: cannot be decompressed: it ends inside the zstd frame at offset {frame:,} "
                                "(the file is truncated)")
        return b

    pos = 0
    while pos < size:
        frame = pos
        if size - pos < 4:
            raise EvalDataError(f"{path}: {size - pos} byte(s) after the zstd data at offset {pos:,}: damaged")
        magic = int.from_bytes(need(4, pos), "little")
        if magic & 0xFFFFFFF0 == _SKIPPABLE:
            pos += 8 + int.from_bytes(need(4, pos + 4), "little")
            if pos > size:
                need(1, size)  # truncated
            continue
        if magic != _ZSTD_MAGIC:
            raise EvalDataError(f"{path}: bytes at offset {pos:,} are not a zstd frame: the file was appended to or "
                                "damaged")
        fhd = need(1, pos + 4)[0]
        single = fhd >> 5 & 1
        header = 1 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + ((1 if single else 0), 2, 4, 8)[fhd >> 6]
        pos += 4 + header
        while True:
            b = int.from_bytes(need(3, pos), "little")
            last, kind, length = b & 1, b >> 1 & 3, b >> 3
            if kind == 3:
                raise EvalDataError(f"{path}: cannot be decompressed: a reserved block type at offset {pos:,}")
            pos += 3 + (1 if kind == 1 else length)
            if last:
                break
        pos += 4 if fhd >> 2 & 1 else 0  # the content checksum
        if pos > size:
            need(1, size)
    f.seek(0)


class _Gunzip:
    """A ``.gz`` file's decompressed bytes (``read(n)``), member after member as ``gzip`` reads them, each member's
    CRC checked. What follows the last member may only be NUL padding (what ``gzip`` skips too): other bytes (a
    file appended to, or damaged) are an ``EvalDataError`` saying how many bytes follow the gzip data and where,
    since lm-eval's reader (``gzip``) refuses such a file, and reading its members alone would score items it
    does not. A file that ends inside a member (truncated) is an error too."""

    def __init__(self, raw, path: Path, size: int):
        self.raw, self.path, self.size = raw, path, size
        self._gen = self._members()
        self._buf = b""

    def read(self, n: int) -> bytes:
        while not self._buf:
            chunk = next(self._gen, None)
            if chunk is None:
                return b""
            self._buf = chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self) -> None:
        self._gen.close()

    def _tail_error(self, at: int) -> EvalDataError:
        n = self.size - at
        return EvalDataError(
            f"{self.path}: {n:,} byte{'' if n == 1 else 's'} after the gzip data at offset {at:,} (neither another "
            f"gzip member nor NUL padding): the file was appended to or damaged, and lm-eval's reader refuses it too; "
            f"keep its data with `gzip -dc {self.path} > FIXED.jsonl` (gzip warns 'trailing garbage ignored') and "
            f"check it")

    def _members(self):
        d, member_at, pos, data = zlib.decompressobj(31), 0, 0, b""  # pos: the file offset of data[0]
        while True:
            if not data:
                data = self.raw.read(_CHUNK)
                if not data:
                    break
            if d is None:  # after a member: another member, NUL padding, or the end of the file
                stripped = data.lstrip(b"\0")
                pos, data = pos + len(data) - len(stripped), stripped
                if not data:
                    continue
                if len(data) < 2:  # one byte: is it the start of a member's magic?
                    more = self.raw.read(_CHUNK)
                    if not more:
                        raise self._tail_error(pos)
                    data += more
                if data[:2] != b"\x1f\x8b":
                    raise self._tail_error(pos)
                d, member_at = zlib.decompressobj(31), pos
            try:
                out = d.decompress(data, _CHUNK)
            except zlib.error as e:
                raise EvalDataError(f"{self.path}: cannot be decompressed: the gzip member at offset {member_at:,} "
                                    f"is damaged ({e})") from None
            rest = d.unused_data if d.eof else d.unconsumed_tail
            pos, data = pos + len(data) - len(rest), rest
            if d.eof:
                d = None
            if out:
                yield out
        if d is not None and pos > member_at:
            raise EvalDataError(f"{self.path}: cannot be decompressed: it ends inside the gzip member at offset "
                                f"{member_at:,} (the file is truncated)")


class _Chunks:
    """The decompressed bytes of an eval file in chunks, ``MAX_FILE_BYTES`` at most (an ``EvalDataError`` past
    it), a leading UTF-8 BOM dropped (``utf-8-sig``)."""

    def __init__(self, path: Path):
        self.path = path
        self.stream, self.raw = _open_stream(path)
        self.total = 0

    def __iter__(self):
        first = True
        while True:
            try:
                chunk = self.stream.read(_CHUNK)
            except EvalDataError:  # _Gunzip's own, saying what is wrong
                raise
            except Exception as e:  # noqa: BLE001  zstandard.ZstdError, OSError
                raise EvalDataError(f"{self.path}: cannot be decompressed ({type(e).__name__}: {e})") from None
            if not chunk:
                return
            self.total += len(chunk)
            if self.total > MAX_FILE_BYTES:
                what = "decompresses to" if self.path.suffix in (".gz", ".zst") else "holds"
                raise EvalDataError(f"{self.path}: {what} more than {MAX_FILE_BYTES} bytes; an eval file may hold at "
                                    f"most {MAX_FILE_BYTES}")
            if first:
                first = False
                if chunk.startswith(codecs.BOM_UTF8[:len(chunk)]) and len(chunk) < len(codecs.BOM_UTF8):
                    chunk += self.stream.read(len(codecs.BOM_UTF8) - len(chunk))  # a tiny first read
                chunk = chunk.removeprefix(codecs.BOM_UTF8)
            yield chunk

    def close(self):
        for f in (self.stream, self.raw):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass


def _lines(chunks):
    """``(line number, bytes, length)`` of each line (split at ``\\n`` only, a ``\\r`` before it dropped); a line
    longer than ``MAX_ITEM_BYTES`` is ``(n, None, its length)``, not kept in memory."""
    n, buf, over = 1, bytearray(), 0
    for chunk in chunks:
        start, view = 0, memoryview(chunk)
        while True:
            nl = chunk.find(b"\n", start)
            piece = view[start:] if nl < 0 else view[start:nl]  # a view: no copy of a long line's chunk
            if over:
                over += len(piece)
            elif len(buf) + len(piece) > MAX_ITEM_BYTES + 1:  # + 1: a \r that may be dropped
                over, buf = len(buf) + len(piece), bytearray()
            else:
                buf += piece
            if nl < 0:
                break
            yield _line(n, buf, over)
            n, buf, over, start = n + 1, bytearray(), 0, nl + 1
    if buf or over:
        yield _line(n, buf, over)


def _line(n: int, buf: bytearray, over: int):
    if over:
        return n, None, over
    if buf.endswith(b"\r"):
        del buf[-1:]
    return (n, None, len(buf)) if len(buf) > MAX_ITEM_BYTES else (n, buf, len(buf))


def _too_long(size: int, what: str) -> str:
    return (f"{what} of {size:,} bytes or more: one item may hold at most {MAX_ITEM_BYTES:,} bytes (MAX_ITEM_BYTES; "
            f"split a longer document into several)")


def _nonempty_str(v) -> bool:
    return isinstance(v, str) and v.strip() != ""


def check_item(kind: str, obj) -> tuple[dict | None, str | None]:
    """-> (the item, None) or (None, why it is not an item of ``kind``)."""
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    if kind in ("bpb", "cloze"):
        text = obj.get("text")
        if not _nonempty_str(text):
            return None, "no non-empty string 'text'" + (" (is this a choice file?)" if "choices" in obj else "")
        if kind == "cloze":
            context, _, target = text.rpartition(" ")
            if not context or not target:
                return None, "a cloze text needs a context, a space and a last word"
        return {"text": text}, None
    context, choices, label = obj.get("context"), obj.get("choices"), obj.get("label")
    if not isinstance(context, str):
        return None, "no string 'context'" + (" (is this a bpb/cloze file?)" if "text" in obj else "")
    if not isinstance(choices, list) or len(choices) < 2:
        return None, "'choices' must be a list of at least 2 non-empty strings"
    if len(choices) > MAX_CHOICES:
        return None, (f"{len(choices):,} choices: an item may hold at most {MAX_CHOICES:,} (MAX_CHOICES; each choice "
                      f"is scored on its own)")
    if not all(_nonempty_str(c) for c in choices):
        return None, "'choices' must be a list of at least 2 non-empty strings"
    if label is None:
        return None, "no 'label'"
    if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(choices):
        return None, f"label {label!r} is not an index into the {len(choices)} choices"
    return {"context": context, "choices": list(choices), "label": label}, None


def read_items(spec: TaskSpec, max_problems: int = 5, check=None) -> TaskItems:
    """The task's valid items in file order, read as a stream, and how many were set aside (the first
    ``max_problems`` reasons, each ``path:line: why``). ``check(item) -> None | why``: a further test an item must
    pass to be kept (``requests.prepare_task``: that the model can score it); ``limit`` counts the items kept
    (the first N that pass), and reading stops once it is reached."""
    path = Path(spec.path)
    out = TaskItems(spec, [])

    def set_aside(n: int, why: str) -> None:
        out.skipped += 1
        if len(out.problems) < max_problems:
            out.problems.append(f"{path}:{n}: {why}")

    def take(n: int, item: dict) -> bool:
        """Keep ``item`` (line ``n``) unless ``check`` refuses it; True once ``limit`` items are kept."""
        why = check(item) if check is not None else None
        if why is not None:
            set_aside(n, why)
            return False
        if len(out.items) >= MAX_ITEMS:
            raise EvalDataError(f"task {spec.name!r}: {path} holds more than {MAX_ITEMS:,} items, the most one task "
                                f"reads (MAX_ITEMS): set limit = N in its [[tasks]] table or --limit N, or split it")
        out.items.append(item)
        out.lines.append(n)
        return bool(spec.limit) and len(out.items) >= spec.limit

    plain = path.name.removesuffix(".gz").removesuffix(".zst").endswith(".txt")
    if plain and spec.kind != "bpb":
        raise EvalDataError(f"{path}: a .txt file is one document: only kind 'bpb' reads it "
                            f"(task {spec.name!r} is {spec.kind!r}; give JSONL)")
    chunks = _Chunks(path)
    try:
        if plain:
            _read_document(chunks, take, set_aside)
        else:
            for n, raw, size in _lines(chunks):
                if raw is None:
                    set_aside(n, _too_long(size, "a line"))
                    continue
                item, why = _parse_line(spec.kind, raw)
                if item is None and why is None:  # a blank line: no item
                    continue
                if item is None:
                    set_aside(n, why)
                elif take(n, item):
                    break
    finally:
        chunks.close()
    if not out.items:
        first = out.problems[0] if out.problems else f"{path}: empty"
        raise EvalDataError(f"task {spec.name!r} ({spec.kind}): no valid item in {path}; first problem: {first}")
    if spec.kind == "choice" and spec.shots >= len(out.items):
        raise EvalDataError(f"task {spec.name!r}: shots = {spec.shots} needs more than {spec.shots} items in {path} "
                            f"(it has {len(out.items)})")
    return out


def _read_document(chunks, take, set_aside) -> None:
    """A ``.txt`` file: one document (line 1), whole."""
    buf, size = bytearray(), 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_ITEM_BYTES:
            break
        buf += chunk
    if size > MAX_ITEM_BYTES:
        set_aside(1, _too_long(size, "a document"))
        return
    try:
        text = buf.decode("utf-8")
    except UnicodeDecodeError as e:
        set_aside(1, f"not UTF-8 text ({e})")
        return
    if text.strip():
        take(1, {"text": text})


def _parse_line(kind: str, raw: bytes) -> tuple[dict | None, str | None]:
    """-> (item, None), (None, why it is set aside), or (None, None) for a blank line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text ({e})"
    if not line.strip():
        return None, None
    try:
        obj = json_files.loads(line, "line")
    except ValueError as e:
        return None, str(e).removeprefix("line: ")
    item, why = check_item(kind, obj)
    if item is not None and not _valid_unicode(item):
        return None, "a lone surrogate escape (\\ud800-\\udfff): not text a tokenizer can encode"
    return item, why


def _valid_unicode(item: dict) -> bool:
    """Every string of the item encodes to UTF-8 (JSON's ``"\\ud800"`` gives a string that does not, and
    SentencePiece then fails with a pybind11 cast error)."""
    for v in item.values():
        for t in (v if isinstance(v, list) else [v]):
            if isinstance(t, str):
                try:
                    t.encode("utf-8")
                except UnicodeEncodeError:
                    return False
    return True


def item_texts(items: TaskItems) -> list[str]:
    """Each item's text as a training document would hold it (for contamination checks)."""
    if items.spec.kind == "choice":
        return [f"{it['context']} {it['choices'][it['label']]}" for it in items.items]
    return [it["text"] for it in items.items]
