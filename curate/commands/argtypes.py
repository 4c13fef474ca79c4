"""Argument types shared by the commands of ``curate`` and ``pretrain``: a whole number within bounds, refused by
argparse in one line (``argument --show: must be a whole number from 1 to 1,000,000,000, got -1``, exit status 2)
instead of a traceback later (an ``OverflowError`` from pyarrow or torch) or a silent nonsense (a negative count
slicing from the end)."""
from __future__ import annotations

import argparse

SANE = 10 ** 9  # bound of a count printed or looped over: more than any real use, less than any C integer's limit
INT64 = 2 ** 63 - 1  # an id stored as int64 (a cluster id)


def whole(minimum: int = 0, maximum: int = SANE, meaning: str = ""):
    """An argparse ``type``: ``int(text)`` in [minimum, maximum]; ``meaning`` (e.g. "0: all") is added to the
    message."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip().replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be a whole number from {minimum:,} to {maximum:,}{f' ({meaning})' if meaning else ''}, "
                                             f"got {value if len(str(value)) <= 30 else str(value)[:30] + '...'}")
        return value

    parse.__name__ = "whole number"
    return parse


def positive(maximum: int = SANE, meaning: str = ""):
    """A whole number from 1 to ``maximum``."""
    return whole(1, maximum, meaning)
