"""A TOML writer for the configs `pretrain ablate` writes (tables of scalars and lists, and arrays of tables
inside a table, like ``[[eval.tasks]]``): the standard library reads TOML but does not write it. ``None`` values
are left out (the key then takes its default)."""
from __future__ import annotations

import json
import math


def value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} as a TOML value")


def _is_table_list(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _body(table: dict) -> list[str]:
    return [f"{k} = {value(v)}" for k, v in table.items()
            if v is not None and not isinstance(v, dict) and not _is_table_list(v)]


def dumps(data: dict) -> str:
    """``data``: top-level keys, tables (dicts) and, inside tables, arrays of tables (lists of dicts)."""
    lines = _body(data)
    for name, table in data.items():
        if not isinstance(table, dict):
            continue
        lines += ["", f"[{name}]", *_body(table)]
        for key, rows in table.items():
            if isinstance(rows, dict):
                raise TypeError(f"[{name}.{key}]: nested tables are not written")
            if _is_table_list(rows):
                for row in rows:
                    lines += ["", f"[[{name}.{key}]]", *_body(row)]
    return "\n".join(lines).lstrip("\n") + "\n"
