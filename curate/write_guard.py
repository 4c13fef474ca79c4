"""A command never writes over what it reads: an output path that is one of its inputs, or lies inside an input
folder, is refused before anything is read or written. Without this, ``pretrain tokenize --output-prefix
curated/web/manifest`` wrote the dataset's ``.json`` sidecar over the curation's ``manifest.json``, and
``--output-prefix out/tokenizer`` would replace the tokenizer's own ``tokenizer.json``."""
from __future__ import annotations

import os


def overwrite_problem(writes, reads) -> str | None:
    """A message naming the first path of ``writes`` that is a path of ``reads`` or lies inside a folder of
    ``reads`` (compared resolved: links, ``..``), else None. Empty and None entries are ignored."""
    reads = [(str(r), os.path.realpath(r)) for r in reads if r]
    for w in writes:
        if not w:
            continue
        rw = os.path.realpath(w)
        for r, rr in reads:
            if rw == rr:
                same = "" if str(w) == r else f" (the same path as {r})"
                return f"{w} is an input of this command{same}: writing it would destroy that input"
            if rw.startswith(rr.rstrip(os.sep) + os.sep) and os.path.isdir(rr):
                return f"{w} lies inside {r}, an input of this command: write it outside that folder"
    return None


def blocking_file(path) -> str | None:
    """The nearest existing path at or above ``path`` when it is not a folder (a file, a device, a dangling
    link: making ``path``, or a folder on the way to it, would fail there), else None."""
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent
    return None if os.path.isdir(p) else p


def output_file_problem(path) -> str | None:
    """A message when ``path``, a file a command is to write, cannot be one: an existing folder, or a path
    below a file. Checked at start: the atomic write at the end would fail after all the work."""
    if not path:
        return None
    if os.path.isdir(path):
        return f"{path} is a folder: give the path of a file to write inside it or elsewhere"
    above = blocking_file(os.path.dirname(os.path.abspath(path)))
    if above:
        return f"{path} lies below {above}, which is a file, not a folder"
    return None
