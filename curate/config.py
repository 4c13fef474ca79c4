"""TOML tables to dataclasses, for `curate` pipelines and `pretrain` training configs: one ``ConfigError``
(every config error of both packages; ``except ConfigError`` catches them all), one loader, one key check.

Values are checked against the dataclass field types in one of two ways: ``check_type`` takes a value as
written (a pipeline's stage parameters are recorded in ``run.json`` as given, so a folder resumes only for
the same pipeline), ``coerce`` converts where nothing is lost (``3.0`` for an integer, ``3`` for a float:
training configs and checkpoints). Every message names the key and what is allowed.
"""
from __future__ import annotations

import dataclasses
import math
import tomllib
import types
import typing
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration that cannot be used (a pipeline or training file, a --set, an option); the message
    says what to change."""


def load_toml(path: str | Path, what: str = "config file", hint: str = "") -> dict:
    """The tables of a TOML file; a missing file, a path that is not a regular file (a folder, a named pipe, a
    device: never opened) or bad TOML is a ``ConfigError`` naming the file. A UTF-8 byte order mark at the
    start (what some Windows editors write) is read past."""
    from curate.file_kind import file_problem

    path = Path(path)
    problem = file_problem(path)
    if problem == "not found":
        raise ConfigError(f"{what} {str(path)!r} does not exist{hint}")
    if problem:
        raise ConfigError(f"{what} {str(path)!r} {problem}{hint}")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8").removeprefix("\ufeff"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    except RecursionError:  # arrays or inline tables nested thousands deep: tomllib recurses per level
        raise ConfigError(f"{path}: not valid TOML: nested too deep to read") from None


def check_keys(table: dict, allowed, where: str, what: str = "keys", qualify: str = "") -> None:
    """Refuse the first key of ``table`` not in ``allowed``, listing those allowed (``qualify`` is written
    before the key's name, e.g. ``"train."``; without it the name is quoted)."""
    unknown = [k for k in table if k not in allowed]
    if unknown:
        name = f"{qualify}{unknown[0]}" if qualify else repr(unknown[0])
        listing = ", ".join(sorted(allowed)) or "none"
        raise ConfigError(f"{where}: unknown key {name}; allowed {what}: {listing}")


def dataclass_params(params_cls: type, table: dict, where: str, what: str = "parameters") -> dict:
    """``table`` checked against ``params_cls`` (keys, value types, its own ``__post_init__`` checks) and
    returned as a dict with the defaults filled in."""
    hints = typing.get_type_hints(params_cls)
    check_keys(table, {f.name for f in dataclasses.fields(params_cls)}, where, what)
    for key, value in table.items():
        check_type(value, hints[key], f"{where}.{key}")
    try:
        obj = params_cls(**table)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from e
    return dataclasses.asdict(obj)


# --- values as written -----------------------------------------------------------------------------

def check_type(value: Any, typ: Any, where: str) -> None:
    if not _matches(value, typ):
        raise ConfigError(f"{where} = {value!r}: expected {_type_name(typ)}")


def _matches(value: Any, typ: Any) -> bool:
    origin = typing.get_origin(typ)
    if typ is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, t) for t in typing.get_args(typ))
    if typ is type(None):
        return value is None
    if origin in (list, tuple):
        args = typing.get_args(typ)
        return isinstance(value, (list, tuple)) and (not args or all(_matches(v, args[0]) for v in value))
    if origin is dict:
        return isinstance(value, dict)
    if typ is float:  # nan and inf pass every `< low` check below them, so they are refused here
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if typ is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(typ, type):
        return isinstance(value, typ)
    return True


def _type_name(typ: Any) -> str:
    if typ is float:
        return "a finite number"
    if typing.get_origin(typ) is not None:  # list[str], not "list"
        return str(typ).replace("typing.", "")
    return getattr(typ, "__name__", None) or str(typ).replace("typing.", "")


# --- values converted where nothing is lost --------------------------------------------------------

def coerce(where: str, value, annotation):
    """Check ``value`` against a dataclass field annotation (int, float, str, bool, list[int], X | None)."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if args and type(None) in args and origin is not list:
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(where, value, inner[0])
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [coerce(f"{where}[{i}]", v, args[0]) for i, v in enumerate(value)]
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}"
                              + (" (TOML read it as a number or a date: write it in quotes)"
                                 if not isinstance(value, (list, dict, bool)) else ""))
        return value
    if annotation is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported type {annotation}")
