"""Evaluation tasks: what a task is (``TaskSpec``), how it is named on the command line and in TOML, and its
items read from a local file with every item checked.

Kinds and their files (JSONL, one item per line; ``.gz`` / ``.zst`` allowed):
- ``bpb``: ``{"text": ...}`` per document (or a ``.txt`` file: one document); language modelling.
- ``cloze``: ``{"text": ...}``; the target is the last word (after the last space), as LAMBADA.
- ``choice``: ``{"context": ..., "choices": [...], "label": index}``; multiple choice.

An item that is not of its kind (a line that is not JSON, a missing key, a label out of range, ...) is set aside
and counted (``TaskItems.skipped``, with the first reasons); a file with no valid item at all is an
``EvalDataError`` naming the file and its first problem. Nothing is downloaded.
"""
from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from curate import json_files
from curate.config import ConfigError

KINDS = ("bpb", "cloze", "choice")
SPEC_KEYS = ("name", "kind", "path", "shots", "stride", "limit")
MAX_FILE_BYTES = 1 << 30  # an eval file is small: refuse to read more than 1 GiB of it
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
    limit: int = 0  # 0: every item; N: the first N valid items


@dataclass
class TaskItems:
    spec: TaskSpec
    items: list[dict]
    skipped: int = 0
    problems: list[str] = field(default_factory=list)  # the first few reasons, "path:line: why"


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
    if not Path(spec.path).is_file():
        raise ConfigError(f"{where}: eval file {spec.path} not found (task {spec.name!r})")
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
    if ":" in rest and not Path(rest).exists():
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
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{where}: task names must differ; repeated: {', '.join(dup)} (set name = ..., or "
                          f"--task KIND:PATH:NAME)")


def _open_text(path: Path):
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise EvalDataError(f"{path}: {size} bytes; an eval file may hold at most {MAX_FILE_BYTES} bytes")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    elif path.suffix == ".zst":
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise EvalDataError(f"{path}: decompresses to more than {MAX_FILE_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EvalDataError(f"{path}: not UTF-8 text ({e})") from None


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
    if not isinstance(choices, list) or len(choices) < 2 or not all(_nonempty_str(c) for c in choices):
        return None, "'choices' must be a list of at least 2 non-empty strings"
    if label is None:
        return None, "no 'label'"
    if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(choices):
        return None, f"label {label!r} is not an index into the {len(choices)} choices"
    return {"context": context, "choices": list(choices), "label": label}, None


def read_items(spec: TaskSpec, max_problems: int = 5) -> TaskItems:
    """The task's valid items (in file order; the first ``limit`` if set) and how many were set aside."""
    path = Path(spec.path)
    if not path.is_file():
        raise EvalDataError(f"{path}: eval file not found (task {spec.name!r})")
    text = _open_text(path)
    out = TaskItems(spec, [])
    plain = path.name.removesuffix(".gz").removesuffix(".zst").endswith(".txt")
    if plain:
        if spec.kind != "bpb":
            raise EvalDataError(f"{path}: a .txt file is one document: only kind 'bpb' reads it "
                                f"(task {spec.name!r} is {spec.kind!r}; give JSONL)")
        if text.strip():
            out.items.append({"text": text})
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json_files.loads(line, "line")
            except ValueError as e:
                item, why = None, str(e).removeprefix("line: ")
            else:
                item, why = check_item(spec.kind, obj)
                if item is not None and not _valid_unicode(item):
                    item, why = None, "a lone surrogate escape (\\ud800-\\udfff): not text a tokenizer can encode"
            if item is None:
                out.skipped += 1
                if len(out.problems) < max_problems:
                    out.problems.append(f"{path}:{n}: {why}")
                continue
            out.items.append(item)
            if spec.limit and len(out.items) >= spec.limit:
                break
    if not out.items:
        first = out.problems[0] if out.problems else f"{path}: empty"
        raise EvalDataError(f"task {spec.name!r} ({spec.kind}): no valid item in {path}; first problem: {first}")
    if spec.kind == "choice" and spec.shots >= len(out.items):
        raise EvalDataError(f"task {spec.name!r}: shots = {spec.shots} needs more than {spec.shots} items in {path} "
                            f"(it has {len(out.items)})")
    return out


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
