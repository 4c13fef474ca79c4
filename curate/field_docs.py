"""A dataclass's fields as a user reads them in a reference: name, type, default written as TOML, and meaning.

The meaning is the field line's trailing ``# comment`` (or the comment lines just above the field), read
from the class's own source with ``tokenize``: the reference is generated from the code, so it cannot drift.
Used by `curate stages` (each stage's ``Params``) and `pretrain config` (the training config's tables).
"""
from __future__ import annotations

import dataclasses
import inspect
import io
import textwrap
import tokenize
import typing
from dataclasses import dataclass

NO_MEANING = ""  # a field without a comment (tests/test_docs.py lists them)
LONG_LIST = 12  # a longer default list is shown by its first items and its length


@dataclass
class Key:
    name: str
    type: str
    default: str
    meaning: str


def describe(cls: type) -> list[Key]:
    """Every field of the dataclass ``cls``, in order."""
    if not dataclasses.is_dataclass(cls):
        return []
    hints = typing.get_type_hints(cls)
    comments = field_comments(cls)
    return [Key(f.name, type_text(hints.get(f.name, f.type)), default_text(f), comments.get(f.name, NO_MEANING))
            for f in dataclasses.fields(cls)]


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
