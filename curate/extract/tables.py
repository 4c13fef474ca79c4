"""A data table's row on one line: the blocks engine writes a block per line, and a table cell (``td``, ``th``)
is a block of its own, so a table came out one cell per line, its rows lost. ``table_rows`` finds the rows
whose cells are written on one line, joined by ``ROW_SEPARATOR`` (``blocks.assemble``): a row that holds
nothing but cells of short text (a data table's row, its header row too). A table used for page layout holds
paragraphs, lists, other tables or long text in its cells: those rows stay a block per line.

Only the line layout changes: the blocks, their features and what the classifier keeps are the same, so the
words of the text are too (word F1 reads ``\\w+`` tokens: unchanged on every page of the gold sets)."""
from __future__ import annotations

import numpy as np

from curate.extract.features import dense_words
from curate.extract.region import last_descendants

# between the cells of a row (trafilatura's plain-text output writes " | " between cells too)
ROW_SEPARATOR = " | "
# a row is joined only when each of its cells holds at most this many words (in any script: a character of a
# script written without spaces counts as its share of a word, ``features.dense_words``) and no line break: a
# layout table's cell holds a column of the page (a paragraph or more)
CELL_WORDS = 30
_SHORT_CELL = 50    # characters: a cell this short holds fewer than CELL_WORDS words in any script (not counted)
_CELL_TAGS = ("td", "th")


def _long(text: str) -> bool:
    """Whether a cell's text of more than ``_SHORT_CELL`` characters holds more than ``CELL_WORDS`` words (runs
    between spaces; the text is white-space collapsed), a character of a script written without spaces counting
    as its share of a word."""
    if len(text) > 12 * CELL_WORDS:
        return True
    n = text.count(" ") + 1
    return n > CELL_WORDS or (not text.isascii() and n + dense_words(text) > CELL_WORDS)


def table_rows(texts: list[str], tags: list[str], owner, parent) -> np.ndarray | None:
    """Per block, the row (its ``tr`` element's number) whose kept cells ``blocks.assemble`` writes on one line,
    or -1. A row is joined when every block inside it is one of its cells (a ``td`` or ``th`` block whose
    parent element is the row: no paragraph, list, heading or table inside a cell), each cell at most
    ``CELL_WORDS`` words without a line break, and it has two cells or more. ``owner``: each block's
    element; ``parent``: each element's parent (elements in document order: an element's descendants are the
    numbers from it to its last descendant). None when no block is a table cell (most pages)."""
    if "td" not in tags and "th" not in tags:
        return None
    cell = np.fromiter((t in _CELL_TAGS for t in tags), dtype=bool, count=len(tags))
    owner = np.asarray(owner, dtype=np.int64)
    parent = np.asarray(parent, dtype=np.int64)
    row = parent[owner[cell]]                  # per cell block: its row
    if (row < 0).any():
        return None
    cells = np.bincount(row, minlength=parent.size)  # per element: the cell blocks right below it
    rows = np.flatnonzero(cells >= 2)
    if not rows.size:
        return None
    # every block inside the row (its owner in the row's range of elements, the row itself included) is one
    # of its cells
    owners = np.sort(owner)
    last = last_descendants(parent)
    inside = np.searchsorted(owners, last[rows], "right") - np.searchsorted(owners, rows, "left")
    good = np.zeros(parent.size, dtype=bool)
    good[rows[inside == cells[rows]]] = True
    idx = np.flatnonzero(cell)
    cand = np.flatnonzero(good[row])  # ... each short, with no line break
    ctexts = [texts[i] for i in idx[cand].tolist()]
    lens = np.fromiter(map(len, ctexts), dtype=np.int64, count=len(ctexts))
    newline = "\n" in "\x00".join(ctexts)
    for j in (range(len(ctexts)) if newline else np.flatnonzero(lens > _SHORT_CELL).tolist()):
        t = ctexts[j]
        if "\n" in t or (len(t) > _SHORT_CELL and _long(t)):
            good[row[cand[j]]] = False
    keep = good[row]
    if not keep.any():
        return None
    out = np.full(len(tags), -1, dtype=np.int64)
    out[idx[keep]] = row[keep]
    return out
