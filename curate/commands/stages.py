"""`curate stages [TYPE]`: the stage reference, generated from the code so it cannot drift.

Every pipeline key of a stage is a field of its ``Params`` dataclass: the name, type and default come
from the dataclass, the meaning from the field line's trailing ``# comment`` (or a comment line just
above it). The reasons a stage sets documents aside come from the stage's ``REASONS`` dict (or its
module's ``REASONS`` / ``REASON``). ``--markdown`` prints the same as markdown: docs/stages.md is that
output (``curate stages --markdown > docs/stages.md``), and tests/test_docs.py keeps the two equal.
"""
from __future__ import annotations

import dataclasses
import inspect
import io
import sys
import textwrap
import tokenize
import typing
from dataclasses import dataclass

from curate.readers import READ_REASONS
from curate.stages import STAGES, stage_class

# Every map stage can set a document aside with this reason (curate/tasks.py's per-document isolation).
STAGE_ERROR = ("stage_error", "the stage raised on this document (the message is in the `error` column)")
NO_MEANING = ""  # a field without a comment (tests/test_docs.py lists them)
READ = "read"  # `curate stages read`: the reader's reasons
LONG_LIST = 12  # a longer default list is shown by its first items and its length


@dataclass
class Key:
    name: str
    type: str
    default: str
    meaning: str


def add_arguments(p) -> None:
    p.add_argument("type", nargs="?", help="a stage type (as in a pipeline's [[stages]] type = ...), or "
                   f"{READ!r} for the reader's reasons; without it, every stage in one line each")
    p.add_argument("--markdown", action="store_true",
                   help="print the full reference of every stage (or of TYPE) as markdown (docs/stages.md)")


def run(args) -> int:
    if args.type == READ:
        print(read_reasons(markdown=args.markdown), end="")
        return 0
    if args.type is not None and args.type not in STAGES:
        print(f"curate: error: no stage type {args.type!r}; known: {', '.join(STAGES)} (and {READ}: the reader)",
              file=sys.stderr)
        return 2
    types = [args.type] if args.type else list(STAGES)
    if args.markdown:
        print(markdown(types), end="")
    elif args.type:
        print(details(args.type), end="")
    else:
        print(overview(), end="")
    return 0


# --- what is known about a stage -------------------------------------------------------------------

def summary(type_name: str) -> str:
    """The first sentence of the stage class's docstring, else of its module's, without a leading ``type``."""
    cls = stage_class(type_name)
    doc = inspect.getdoc(cls) if cls.__doc__ else inspect.getdoc(sys.modules[cls.__module__])
    paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
    sentence = paragraph.split(". ")[0].rstrip(".")
    prefix = f"``{type_name}``:"
    return sentence[len(prefix):].strip() if sentence.startswith(prefix) else sentence


def keys(type_name: str) -> list[Key]:
    params = stage_class(type_name).Params
    if not dataclasses.is_dataclass(params):
        return []
    hints = typing.get_type_hints(params)
    comments = field_comments(params)
    return [Key(f.name, type_text(hints.get(f.name, f.type)), default_text(f),
                comments.get(f.name, NO_MEANING)) for f in dataclasses.fields(params)]


def reasons(type_name: str) -> list[tuple[str, str]]:
    cls = stage_class(type_name)
    module = sys.modules[cls.__module__]
    found = getattr(cls, "REASONS", None) or getattr(module, "REASONS", None)
    if not found and isinstance(getattr(module, "REASON", None), str):
        found = {module.REASON: ""}
    out = list((found or {}).items())
    return out + [STAGE_ERROR] if cls.kind == "map" else out


def field_comments(params: type) -> dict[str, str]:
    """Field name -> its comment: trailing ``# ...`` on the field's line(s), else the comment lines just above."""
    source = textwrap.dedent(inspect.getsource(params))
    out: dict[str, str] = {}
    above: list[str] = []
    line: list[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and not line:
            above.append(tok.string.lstrip("#").strip())
        elif tok.type == tokenize.NEWLINE:
            _take_field(line, above, out)
            line, above = [], []
        elif tok.type == tokenize.NL and not line and not tok.line.strip():
            above = []  # a blank line ends a block of comments above
        elif tok.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            line.append(tok)
    return out


def _take_field(line: list, above: list[str], out: dict) -> None:
    if len(line) < 2 or line[0].type != tokenize.NAME or line[1].string != ":" or line[0].start[1] == 0:
        return
    trailing = [t.string.lstrip("#").strip() for t in line if t.type == tokenize.COMMENT]
    text = " ".join(trailing) if trailing else " ".join(above)
    if text:
        out[line[0].string] = text


def type_text(typ) -> str:
    if typing.get_origin(typ) is not None:
        return str(typ).replace("typing.", "")
    return getattr(typ, "__name__", None) or str(typ)


def default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    return value_text(value)


def value_text(value) -> str:
    """A default as it is written in a pipeline's TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        items = [value_text(v) for v in value]
        if len(items) > LONG_LIST:
            return "[" + ", ".join(items[:LONG_LIST // 2]) + f", ... ({len(items)} in all)]"
        return "[" + ", ".join(items) + "]"
    return repr(value)


# --- printing --------------------------------------------------------------------------------------

def overview() -> str:
    width = max(map(len, STAGES))
    lines = [f"{t.ljust(width)}  {stage_class(t).kind:6}  {summary(t)}" for t in STAGES]
    hint = f"`curate stages TYPE` shows a stage's keys and reasons; `curate stages {READ}` the reader's."
    return "\n".join(lines) + f"\n\n{hint}\n"


def details(type_name: str) -> str:
    kind = stage_class(type_name).kind
    lines = [f"{type_name} ({kind} stage): {summary(type_name)}", "", "keys:"]
    for k in keys(type_name) or [Key("(none)", "", "", "")]:
        lines.append(f"  {k.name} ({k.type}, default {k.default})" if k.type else f"  {k.name}")
        if k.meaning:
            lines.append(f"      {k.meaning}")
    lines += ["", "reasons (set-aside documents' `reason` column):"]
    lines += [f"  {code}: {text}" if text else f"  {code}" for code, text in reasons(type_name)]
    return "\n".join(lines) + "\n"


def markdown(types: list[str]) -> str:
    out = ["# Stage reference", "",
           "Generated by `curate stages --markdown` from each stage's `Params` dataclass and reasons; "
           "do not edit by hand. A pipeline's `[[stages]]` table takes `type` (below), an optional `name`, "
           "and these keys. An unknown key or a wrong type stops the run at start, naming the key.", ""]
    out += ["| type | kind | what it does |", "|---|---|---|"]
    out += [f"| [`{t}`](#{t}) | {stage_class(t).kind} | {_cell(summary(t))} |" for t in types]
    for t in types:
        out += ["", f"## {t}", "", f"*{stage_class(t).kind} stage*: {summary(t)}", ""]
        ks = keys(t)
        if ks:
            out += ["| key | type | default | meaning |", "|---|---|---|---|"]
            out += [f"| `{k.name}` | `{k.type}` | `{_cell(k.default)}` | {_cell(k.meaning)} |" for k in ks]
        else:
            out.append("No keys.")
        rs = reasons(t)
        out += ["", "Reasons:" if rs else "Sets nothing aside.", ""]
        out += [f"- `{code}`" + (f": {_cell(text)}" if text else "") for code, text in rs]
    if len(types) > 1:
        out += ["", read_reasons(markdown=True)]
    return "\n".join(out).rstrip("\n") + "\n"


def read_reasons(markdown: bool) -> str:
    intro = ("The reader is no stage of the pipeline file, but it sets aside input that cannot become a document, "
             "in `dropped/00_read/read-*`, with these reasons:")
    if markdown:
        lines = [f"## {READ}", "", intro, ""] + [f"- `{code}`: {_cell(text)}" for code, text in READ_REASONS.items()]
    else:
        lines = [intro, ""] + [f"  {code}: {text}" for code, text in READ_REASONS.items()]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
