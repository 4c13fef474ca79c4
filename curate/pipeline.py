"""A pipeline file (TOML) to a validated ``Pipeline``. Every error names the key and what is allowed.

```toml
[pipeline]
name = "demo"
output = "out/demo/curated"   # folder for shards, manifest.json and stats.json
workers = 2                   # local process pool size
format = "arrow"              # shard format: "arrow" (IPC + zstd) or "parquet"
shard_rows = 5000             # documents per shard written by the reader
max_doc_bytes = 10485760      # larger inputs are set aside as too_large
split_bytes = 16777216        # a larger input file is read by several tasks of about this size
keep_intermediate = false     # keep every step's shards under steps/ (default: removed once used)
keep_dropped = "full"         # set-aside documents: "full" (with text), "ids" (id, url, stage,
                              #   reason, duplicate_of), "none" (counts in stats.json only)
keep_plans = false            # keep the plans of global stages under plans/ after the run
max_in_flight = 0             # tasks submitted at once (0: 4 per worker / cluster CPU)
max_retries = 3               # a task whose worker died (killed, node lost) is retried this often
stage_timeout_s = 60          # CPU seconds one document may take in one map stage (0: no limit); a
                              #   document over it is set aside as stage_timeout (curate/stage_watch.py)

[[sources]]
path = "data/*.warc.gz"       # a glob
format = "warc"               # optional: inferred from the extension

[[stages]]
type = "extract"              # one of curate.stages.STAGES
name = "extract"              # optional, default the type: letters, digits, '_' or '-', at most 64 bytes, unique
                              #   ignoring case, not "read" (the reader's); part of file names under dropped/
# ...the stage's own parameters
```
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from curate.config import ConfigError, check_keys, check_type, dataclass_params, load_toml
from curate.readers import DEFAULT_MAX_DOC_BYTES, DEFAULT_SPLIT_BYTES, FORMATS, Matches, match_sources
from curate.shards import FORMATS as SHARD_FORMATS
from curate.stages import STAGES, stage_class


DEFAULT_STAGE_TIMEOUT_S = 60.0
MIN_STAGE_TIMEOUT_S = 0.05  # the stage watcher reads the child's CPU time every 0.05 s (stage_watch.POLL_S)


@dataclass
class StageSpec:
    type: str
    name: str
    params: dict  # validated, with defaults filled in
    # CPU seconds one document may take in this (map) stage, 0: no limit (the pipeline's stage_timeout_s)
    stage_timeout_s: float = DEFAULT_STAGE_TIMEOUT_S

    def build(self):
        cls = stage_class(self.type)
        return cls(self.name, cls.Params(**self.params))

    @property
    def kind(self) -> str:
        return stage_class(self.type).kind


@dataclass
class Pipeline:
    name: str
    output: str
    sources: list[dict]
    stages: list[StageSpec]
    workers: int = 1
    format: str = "arrow"
    shard_rows: int = 5000
    max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES
    split_bytes: int = DEFAULT_SPLIT_BYTES
    keep_intermediate: bool = False
    keep_dropped: str = "full"
    keep_plans: bool = False
    max_in_flight: int = 0
    max_retries: int = 3
    stage_timeout_s: float = DEFAULT_STAGE_TIMEOUT_S
    path: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


MIN_SPLIT_BYTES = 4096
PIPELINE_KEYS = {"name": str, "output": str, "workers": int, "format": str, "shard_rows": int, "max_doc_bytes": int,
                 "split_bytes": int, "keep_intermediate": bool, "keep_dropped": str, "keep_plans": bool,
                 "max_in_flight": int, "max_retries": int, "stage_timeout_s": float}
KEEP_DROPPED = ("full", "ids", "none")
SOURCE_KEYS = {"path": str, "format": str, "text_field": str, "id_field": str}


def load_pipeline(path: str | Path, inputs: list[str] | None = None, output: str | None = None,
                  workers: int | None = None) -> Pipeline:
    raw = load_toml(path, what="pipeline file")
    return parse_pipeline(raw, str(path), inputs=inputs, output=output, workers=workers)


def parse_pipeline(raw: dict, where: str = "pipeline", inputs=None, output=None, workers=None) -> Pipeline:
    check_keys(raw, {"pipeline", "sources", "stages"}, where, "top-level tables")
    head = raw.get("pipeline", {})
    if not isinstance(head, dict):
        raise ConfigError(f"{where}: [pipeline] must be a table")
    check_keys(head, PIPELINE_KEYS, f"{where}: [pipeline]", "keys")
    for key, typ in PIPELINE_KEYS.items():
        if key in head:
            check_type(head[key], typ, f"{where}: [pipeline].{key}")
    fmt = head.get("format", "arrow")
    if fmt not in SHARD_FORMATS:
        raise ConfigError(f"{where}: [pipeline].format = {fmt!r}; allowed: {', '.join(SHARD_FORMATS)}")

    if inputs:
        sources = [{"path": p} for p in inputs]
    else:
        sources = raw.get("sources", [])
        if not isinstance(sources, list) or not sources:
            raise ConfigError(f"{where}: needs at least one [[sources]] table with a `path` glob (or pass --input)")
    for i, src in enumerate(sources):
        here = f"{where}: [[sources]] #{i + 1}"
        check_keys(src, SOURCE_KEYS, here, "keys")
        if "path" not in src:
            raise ConfigError(f"{here}: missing `path` (a file or glob)")
        for key, typ in SOURCE_KEYS.items():
            if key in src:
                check_type(src[key], typ, f"{here}.{key}")
        if src.get("format") and src["format"] not in FORMATS:
            raise ConfigError(f"{here}.format = {src['format']!r}; allowed: {', '.join(FORMATS)}")
        for key in ("text_field", "id_field"):
            if key in src and not src[key].strip():
                raise ConfigError(f"{here}.{key} = {src[key]!r}: name the field (or leave the key out: "
                                  f"{'text' if key == 'text_field' else 'id'})")

    out = output or head.get("output")
    if not out:
        raise ConfigError(f"{where}: [pipeline].output is missing (or pass --output DIR)")

    stages = []
    names = set()
    for i, table in enumerate(raw.get("stages", [])):
        spec = parse_stage(table, f"{where}: [[stages]] #{i + 1}")
        if spec.name.lower() in names:
            same = "named" if spec.name in [s.name for s in stages] else "whose names differ only in case"
            raise ConfigError(f"{where}: [[stages]] #{i + 1}: two stages {same} {spec.name!r}; give one another "
                              f"`name`" + ("" if same == "named" else " (their files under dropped/ would be one "
                                                                      "file on a case-insensitive file system)"))
        names.add(spec.name.lower())
        stages.append(spec)

    n_workers = workers if workers is not None else head.get("workers", 1)
    if n_workers < 1:
        raise ConfigError(f"{where}: workers must be >= 1, got {n_workers}")
    shard_rows = head.get("shard_rows", 5000)
    if shard_rows < 1:
        raise ConfigError(f"{where}: [pipeline].shard_rows must be >= 1")
    keep_dropped = head.get("keep_dropped", "full")
    if keep_dropped not in KEEP_DROPPED:
        raise ConfigError(f"{where}: [pipeline].keep_dropped = {keep_dropped!r}; allowed: {', '.join(KEEP_DROPPED)}")
    # split_bytes: below a few KiB every record is a task of its own (split_bytes = 1 made a 2.4 MB JSONL file
    # 100,000 read tasks and shards)
    for key, low in (("split_bytes", MIN_SPLIT_BYTES), ("max_doc_bytes", 1), ("max_in_flight", 0), ("max_retries", 0)):
        if head.get(key, low) < low:
            raise ConfigError(f"{where}: [pipeline].{key} must be >= {low}, got {head[key]}")
    timeout = head.get("stage_timeout_s", DEFAULT_STAGE_TIMEOUT_S)
    if not (timeout == 0 or MIN_STAGE_TIMEOUT_S <= timeout < float("inf")):
        # under the watcher's poll interval a limit is not measured (it read its CPU time every 0.05 s)
        raise ConfigError(f"{where}: [pipeline].stage_timeout_s = {timeout!r}: CPU seconds per document and map "
                          f"stage, 0 (no limit) or at least {MIN_STAGE_TIMEOUT_S}")
    for spec in stages:
        spec.stage_timeout_s = float(timeout)
    return Pipeline(
        name=head.get("name", Path(where).stem), output=out, sources=sources, stages=stages,
        workers=n_workers, format=fmt, shard_rows=shard_rows,
        max_doc_bytes=head.get("max_doc_bytes", DEFAULT_MAX_DOC_BYTES),
        split_bytes=head.get("split_bytes", DEFAULT_SPLIT_BYTES),
        keep_intermediate=head.get("keep_intermediate", False), keep_dropped=keep_dropped,
        keep_plans=head.get("keep_plans", False), max_in_flight=head.get("max_in_flight", 0),
        max_retries=head.get("max_retries", 3), stage_timeout_s=float(timeout), path=where,
    )


# A stage's name is a row of stats.json, the `stage` column of its set-aside documents, part of the file names
# dropped/NN_<step>/<stage>-<task>.arrow and, for a global stage, of the folders steps/NN_<stage>/ and
# plans/NN_<stage>/. The names below are taken (compared ignoring case: on a case-insensitive file system
# "Read-..." and "read-..." are one file); "read" is ``curate.tasks.READ_STAGE`` (that module imports this one).
RESERVED_STAGE_NAMES = {
    "read": "the reader's: its row in stats.json and its files under dropped/00_read/ are named so",
}
MAX_STAGE_NAME = 64  # bytes of UTF-8: with "NN_", "-<task>", ".parquet" and a temporary name far below 255


def parse_stage(table: dict, where: str) -> StageSpec:
    if not isinstance(table, dict) or "type" not in table:
        raise ConfigError(f"{where}: missing `type`; allowed: {', '.join(STAGES)}")
    type_ = table["type"]
    if type_ not in STAGES:
        raise ConfigError(f"{where}: type = {type_!r} is not a stage; allowed: {', '.join(STAGES)}")
    try:
        cls = stage_class(type_)
    except ImportError as e:
        raise ConfigError(f"{where}: stage {type_!r} cannot be loaded: {e}") from e
    name = table.get("name", type_)
    if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"{where}: name = {name!r}; use letters, digits, '_' or '-'")
    size = len(name.encode("utf-8"))
    if size > MAX_STAGE_NAME:  # it becomes part of file and folder names (curate/output.py)
        unit = "characters" if name.isascii() else "bytes as UTF-8"
        raise ConfigError(f"{where}: name = {name[:40]!r}... is {size} {unit} long; use at most {MAX_STAGE_NAME} "
                          f"(the name becomes part of file and folder names under dropped/, steps/ and plans/)")
    if name.lower() in RESERVED_STAGE_NAMES:
        raise ConfigError(f"{where}: name = {name!r} is reserved ({RESERVED_STAGE_NAMES[name.lower()]}); "
                          f"give the stage another `name`")
    params = {k: v for k, v in table.items() if k not in ("type", "name")}
    return StageSpec(type_, name, dataclass_params(cls.Params, params, f"{where} ({type_})"))


def resolve_inputs(pipeline: Pipeline) -> Matches:
    """The input files, with their formats, and the paths matched but not read (``readers.match_sources``,
    one pass over the globs); fails early on a source that matches nothing or an unknown format."""
    matches = match_sources(pipeline.sources)
    for src, count in zip(pipeline.sources, matches.matched):
        if not count:
            if os.path.isdir(src["path"]):
                raise ConfigError(f"source {src['path']!r} is a folder: give a glob of the files to read, e.g. "
                                  f"{os.path.join(src['path'], '**', '*.jsonl')!r}")
            raise ConfigError(f"source {src['path']!r} matches no file")
    for f in matches.files:
        if f["format"] is None:
            raise ConfigError(f"cannot infer the format of {f['path']!r} from its extension; set `format` "
                              f"in its [[sources]] table to one of {', '.join(FORMATS)}")
    return matches
