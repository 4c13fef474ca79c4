"""Readers: every input record becomes a document, a counted skip, or a set-aside row with a reason.

A reader yields ``("doc", row)`` for a document, ``("drop", row, reason)`` for input that cannot become one,
``("skip", kind)`` for a record that is not a document at all (WARC request/revisit/metadata records,
non-HTML responses) and ``("count", key, n)`` for counters the runner adds to the read stage's stats
(``surrogates_replaced``, ``warc_single_gzip_members``, ``jsonl_utf16_files``, ``files_without_text_column``).
A reader never raises on bad input: it resyncs after damage (next line, next WARC record: ``WARC/1.x``,
``0.17``, ``0.18``, next gzip member) and sets the damaged bytes aside as one row with their offset and a reason
from :data:`READ_REASONS`. Every string it yields is valid UTF-8.

Large files are read in splits: :func:`plan_splits` cuts a file into JSON-serialisable splits (byte ranges
at line or record boundaries, gzip members, Parquet row groups, Arrow batches) and :func:`read_split` reads
one; every record lands in exactly one split, with the same id whatever the split size, and
:func:`read_file` is all splits of a file in order. The format modules say how each cuts and names records:
:mod:`~curate.readers.jsonl`, :mod:`~curate.readers.warc` (ARC: :mod:`~curate.readers.arc`),
:mod:`~curate.readers.tables`, :mod:`~curate.readers.html`. A source's ``path`` that exists is that file, even
when it looks like a glob (``a[1].jsonl``): :func:`source_paths`.

Ids that a record does not bring (``file:line``, ``file@offset``, ``file:row``, an HTML file's own) begin with
the file's base name, or, when two inputs of a run share a base name (``a/x.jsonl``, ``b/x.jsonl``), with the
shortest end of its path that no other input of the run shares (``a/x.jsonl:2``, ``b/x.jsonl:2``): the run
gives it to the split as ``id_prefix`` (:func:`id_prefixes`), so a file whose base name is unique keeps the ids
it had. A name holding ``@`` or ``:`` is written as a JSON string (:func:`safe_id_name`).
"""
from __future__ import annotations

import glob
import json
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

from curate.file_kind import describe_kind, file_id
from curate.readers import html, jsonl, tables, warc
from curate.readers.streams import unreadable
from curate.readers.text import clean_row, row
from curate.schema import READ_REASONS as _READ_REASONS

FORMATS = ("warc", "html", "jsonl", "parquet", "arrow")
DEFAULT_MAX_DOC_BYTES = 10 * 1024 * 1024  # a 10 MB document is far beyond any real web page's text
DEFAULT_SPLIT_BYTES = 16 * 1024 * 1024  # a 36 MB .jsonl.gz of prose: 6 tasks, both cores busy from one file

# What the readers' reasons mean: one table, in curate.schema (readers.READ_REASONS is the same object).
READ_REASONS = _READ_REASONS

_SUFFIXES = [
    (".warc", "warc"), (".arc", "warc"), (".jsonl", "jsonl"), (".json", "jsonl"),
    (".parquet", "parquet"), (".arrow", "arrow"), (".feather", "arrow"), (".ipc", "arrow"),
    (".html", "html"), (".htm", "html"),
]
_COMPRESSED = (".gz", ".zst", ".bz2", ".xz")  # after a text format's suffix (``.jsonl.xz``, ``.warc.gz``)


def infer_format(path: str) -> str | None:
    lower = path.lower()
    for c in _COMPRESSED:
        if lower.endswith(c):
            lower = lower[: -len(c)]
            break
    else:
        c = ""
    for suffix, fmt in _SUFFIXES:
        if c and fmt in ("parquet", "arrow"):
            continue  # a compressed Parquet/Arrow file is not read as such (they compress inside)
        if lower.endswith(suffix):
            return fmt
    return None


def plan_splits(path: str, fmt: str, *, target_bytes: int = DEFAULT_SPLIT_BYTES,
                index_path: str | None = None) -> list[dict]:
    """The read tasks of one input file: JSON-serialisable splits in file order, each ``{"path", "format", ...}``.

    Planning reads little: footers (Parquet/Arrow), a few KiB at each cut point (WARC, compressed JSONL);
    plain JSONL is read once to count newlines (line numbers are ids). A one-stream ``.jsonl.gz`` is
    decompressed once when ``index_path`` is given, to write a seek index there that its splits read
    through (:mod:`~curate.readers.gzindex`). A file that cannot be planned is one split."""
    _check_format(fmt)
    try:
        if fmt in ("jsonl", "warc", "html") and unreadable(path):
            return [{"path": path, "format": fmt}]  # read_split sets it aside whole
        if fmt == "jsonl":
            return jsonl.plan(path, target_bytes, index_path)
        if fmt == "warc":
            return warc.plan(path, target_bytes)
        if fmt in ("parquet", "arrow"):
            return tables.plan(path, fmt, target_bytes)
    except (OSError, ValueError, EOFError):
        pass
    return [{"path": path, "format": fmt}]


def read_split(split: dict, *, text_field: str = "text", id_field: str = "id",
               max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES) -> Iterator[tuple]:
    """Yield the items described in the module docstring for one split from :func:`plan_splits`."""
    path, fmt = split["path"], split["format"]
    _check_format(fmt)
    name = id_name(split)
    bad = unreadable(path) if fmt in ("jsonl", "warc", "html") and not split.get("start") and not split.get("dstart") else None
    if bad:  # bytes that do not match what the name says, or a compression that is not read
        yield ("drop", row(f"{name}:{bad[0]}", bad[1], path), bad[0])
        return
    if fmt == "warc":
        items = warc.read(split, name, max_doc_bytes)
    elif fmt == "html":
        items = html.read(path, name, max_doc_bytes)
    elif fmt == "jsonl":
        items = jsonl.read(split, name, text_field, id_field, max_doc_bytes)
    else:
        items = tables.read(split, name, text_field, id_field, max_doc_bytes)
    replaced = 0
    try:
        for item in items:
            if item[0] in ("doc", "drop"):
                _, n = clean_row(item[1])
                replaced += n
            yield item
    except Exception as e:  # a reader bug must not end the run: the split's rest is set aside, named
        where = split_where(split)
        yield ("drop", row(f"{name}:reader_error:{where}", f"{type(e).__name__}: {e}"[:2000], path), "reader_error")
    if replaced:
        yield ("count", "surrogates_replaced", replaced)


def split_where(split: dict) -> dict:
    """Where in its file a split lies (its range keys), for ids and messages that name it."""
    return {k: v for k, v in split.items() if k not in ("path", "format", "expect", "id_prefix")}


def id_name(split: dict) -> str:
    """What the ids a split's records do not bring begin with: its ``id_prefix`` when the run gave it one
    (:func:`id_prefixes`), else its file's base name."""
    prefix = split.get("id_prefix")
    return safe_id_name(prefix if isinstance(prefix, str) and prefix else os.path.basename(split["path"]))


_ID_SEPARATORS = re.compile(r'[@:]|^"')


def safe_id_name(name: str) -> str:
    """``name`` as the ids of its records begin with it: as it is, or, where it holds ``@`` or ``:`` (what
    begins an id's place in its file: ``:line``, ``@offset``, ``:row``) or begins with ``"``, as a JSON string
    (``"x.jsonl.gz@1234"``). So a name is never another file's id with its place cut short: line 1 of a file
    named ``x.jsonl.gz@1234`` and line 1 of the member at offset 1234 of ``x.jsonl.gz`` are two ids, and so are
    an HTML file named ``x.jsonl:3`` and line 3 of ``x.jsonl``. A name without those characters, as nearly
    every file's is, keeps the ids it always had."""
    return json.dumps(name, ensure_ascii=False) if _ID_SEPARATORS.search(name) else name


def id_prefixes(paths: list[str]) -> dict[str, str]:
    """The ``id_prefix`` of each input of a run whose base name another input shares: the shortest end of its
    path (whole folder names, from its absolute path) that no other input's path ends with, so ``a/x.jsonl`` and
    ``b/x.jsonl`` make ``a/x.jsonl:1`` and ``b/x.jsonl:1``, not two ``x.jsonl:1``. Inputs with a base name of
    their own are not listed: their ids begin with it, as they always did. Two paths of one file are one input
    (:func:`match_sources`); two different paths always differ somewhere, so every prefix is unique."""
    groups: dict[str, list[str]] = {}
    for p in dict.fromkeys(paths):
        groups.setdefault(os.path.basename(p), []).append(p)
    out: dict[str, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        parts = {p: tuple(_components(p)) for p in group}
        left, k = list(group), 2  # (one count per length of ending: linear in the inputs, however many share)
        while left:
            counts = Counter(q[-k:] for q in parts.values())
            still = []
            for p in left:
                if counts[parts[p][-k:]] == 1 or k >= len(parts[p]):
                    out[p] = os.path.join(*parts[p][-k:])
                else:
                    still.append(p)
            left, k = still, k + 1
    return out


def _components(path: str) -> list[str]:
    """An absolute path's folder names and base name, the root first (``["/", "a", "x.jsonl"]``)."""
    head, parts = os.path.abspath(path), []
    while True:
        head, tail = os.path.split(head)
        if not tail:
            return [head] + parts[::-1]
        parts.append(tail)


def read_file(path: str, fmt: str, *, text_field: str = "text", id_field: str = "id",
              max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES) -> Iterator[tuple]:
    """All splits of one file, in order: the same items as reading it unsplit."""
    for split in plan_splits(path, fmt, target_bytes=1 << 62):
        yield from read_split(split, text_field=text_field, id_field=id_field, max_doc_bytes=max_doc_bytes)


def source_paths(pattern: str) -> list[str]:
    """What a source's ``path`` names, sorted: the path itself when it exists (a file named ``a[1].jsonl`` or
    ``what?.jsonl`` is that file, not a glob), else the glob's matches."""
    if os.path.lexists(pattern):
        return [pattern]
    return sorted(glob.glob(pattern, recursive=True))


@dataclass
class Matches:
    """What the sources' globs match, from one pass over them (``match_sources``)."""
    files: list[dict]     # the files to read, in source then path order, each once
    repeated: list[str]   # paths not read again: an earlier match is the same file (device and inode)
    unusable: list[str]   # paths not read, each with why: pipes, sockets, devices, broken or looping links,
    #                       directories named like a data file (``x.jsonl/``); other directories (``**``) are
    #                       not listed
    matched: list[int]    # per source, the regular files it matched (repeats included)


def match_sources(sources: list[dict]) -> Matches:
    """Expand each source's glob (sorted, so task order is stable; per-source options kept) with one ``stat``
    per match. A file is read once however many paths name it: a link to it, a hard link, a ``**`` glob
    through a link to a folder above (``in/sub -> ..`` matched the same file 40 times, once per level of
    links), two sources that overlap. Two sources that match one file with different settings (``text_field``,
    ``id_field``, ``format``) stop the run at start (``ConfigError``): it would be read once, with one source's
    settings, and the other's silently ignored."""
    m = Matches([], [], [], [])
    seen: dict[tuple[int, int], str] = {}
    settings: dict[tuple[int, int], tuple[int, dict]] = {}  # file -> (its first source's number, settings)
    for k, src in enumerate(sources):
        count = 0
        for p in source_paths(src["path"]):
            try:
                st = os.stat(p)
            except OSError as e:  # a broken link, a link loop, a name too long
                why = "a broken or looping link" if os.path.islink(p) else f"unreadable ({e.strerror or e})"
                m.unusable.append(f"{p!r} ({why})")
                continue
            if not stat.S_ISREG(st.st_mode):
                if not (stat.S_ISDIR(st.st_mode) and infer_format(p) is None):
                    m.unusable.append(f"{p!r} ({describe_kind(st.st_mode)})")
                continue
            count += 1
            fmt = src.get("format") or infer_format(p)
            mine = {"text_field": src.get("text_field", "text"), "id_field": src.get("id_field", "id"), "format": fmt}
            first = seen.get(file_id(st))
            if first is not None:
                at, theirs = settings[file_id(st)]
                _check_same_settings(p, first, k, at, sources, mine, theirs)
                m.repeated.append(f"{p!r} (the same file as {first!r})")
                continue
            seen[file_id(st)] = p
            settings[file_id(st)] = (k, mine)
            m.files.append({**src, "path": p, "format": fmt})
        m.matched.append(count)
    return m


def _check_same_settings(path: str, first: str, k: int, at: int, sources: list[dict], mine: dict,
                         theirs: dict) -> None:
    """Refuse (``ConfigError``) a file that source ``k`` matches with other settings than source ``at``, which
    matched it first (as ``first``) and whose settings it is read with."""
    differ = [key for key in mine if mine[key] != theirs[key]]
    if not differ:
        return
    from curate.config import ConfigError

    said = ", ".join(f"{key} = {json.dumps(mine[key])} in #{k + 1}, {json.dumps(theirs[key])} in #{at + 1}"
                     for key in differ)
    same = "" if path == first else f" (as {first!r})"
    raise ConfigError(
        f"[[sources]] #{k + 1} (path = {sources[k]['path']!r}) matches {path!r}, a file [[sources]] #{at + 1} "
        f"(path = {sources[at]['path']!r}) matches too{same}, with other settings: {said}. A file is read once, with "
        f"one source's settings: make the globs not overlap, or give both sources the same "
        f"{' and '.join(differ)}")


def expand_sources(sources: list[dict]) -> list[dict]:
    """The files the sources name, each once (``match_sources``)."""
    return match_sources(sources).files


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
