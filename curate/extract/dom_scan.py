"""The block walk of ``dom_walk.walk``, compiled: one numba pass over lexbor's tree.

``walk`` visits lexbor's tree node by node from Python. ``walk_nodes`` (in ``dom_scan_kernel``) does the
same in one compiled pass that reads the nodes where lexbor keeps them: each node's tag id, first child, next
sibling, text and attributes at their offsets in lexbor's structs, checked against selectolax's API before
it is first used (``lexbor_layout``). It keeps the same state as ``walk`` (the block owner, ancestor tag bits,
class-word bits, link chars) and writes the same blocks, element parents and chars as arrays, the block texts
already white-space collapsed (``" ".join(raw.split())``; ``pre`` blocks ``raw.strip("\\n")``) into one
UTF-8 buffer.

Where that check fails (a selectolax whose lexbor is laid out otherwise), ``scan_body`` reads lexbor's
serialization of the body instead, which is the tree written out: every element opened and closed (void
elements have no end tag), text with ``&``, ``<``, ``>`` and U+00A0 escaped (in attribute values ``"`` too),
the text of ``xmp`` / ``noembed`` / ``noframes`` / ``iframe`` / ``script`` / ``style`` as it is; where the
serialization is not what it expects (an end tag that does not close the open element, an entity other than
those five, ``plaintext``) it gives up. Both give up on a page deeper than ``MAX_DEPTH``; ``walk_arrays`` then
runs ``walk`` itself: the result is ``walk``'s in every case (``tests/test_extract_dom.py`` compares the three
on real and generated pages). This module is the Python side (the tables, the buffers, the result as arrays);
the kernels are ``dom_scan_kernel``.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

from curate.extract.dom_scan_kernel import (B_ANC, B_CE, B_CS, B_DEPTH, B_EL, B_LINK, B_OWN, B_TAG, E_CHARS, E_LINK,
                                            E_PARENT, FLAG_PLAINTEXT, FLAG_RAW, FLAG_VOID, HIDDEN_BIT, NEED_ROOM, OK,
                                            scan_body, walk_nodes)
from curate.extract.dom_walk import MAX_DEPTH, parse, walk
from curate.extract.lexbor_layout import node_tables as _layout_tables
from curate.extract.tags import HIDDEN_BIT as TAGS_HIDDEN_BIT
from curate.extract.tags import CLASS_WORDS, INLINE, ROLE_BITS, SPAN_OTHER, TAG_INFO, WIDGET_BITS, tag_info

# tags: the lexbor serializer writes no end tag for these, and the text inside these as it is
VOID_TAGS = ("area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "input", "keygen",
             "link", "meta", "param", "source", "track", "wbr")
RAW_TEXT_TAGS = ("xmp", "noembed", "noframes", "iframe", "script", "style")
N_WORDS = (len(CLASS_WORDS) + 63) // 64  # uint64 words of a class-word bit set
if HIDDEN_BIT != TAGS_HIDDEN_BIT:
    raise ImportError(f"dom_scan_kernel.HIDDEN_BIT {HIDDEN_BIT} differs from tags.HIDDEN_BIT {TAGS_HIDDEN_BIT}: set "
                      f"the kernel's to the ancestor bit of \"hidden\" in tags.ANCESTOR_TAGS")


def _pack(name: bytes) -> tuple[int, int]:
    b = name.ljust(16, b"\0")
    return int.from_bytes(b[:8], "little"), int.from_bytes(b[8:16], "little")


def _split_bits(v: int) -> list[int]:
    return [(v >> (64 * k)) & 0xFFFFFFFFFFFFFFFF for k in range(N_WORDS)]


def _tables():
    """The constant tables the scan reads (built once): tag names packed for a binary search, what each tag
    is (category, ancestor bit, link, own index, flags), the class words and the ARIA roles as bytes."""
    names = sorted(set(TAG_INFO) | set(VOID_TAGS) | set(RAW_TEXT_TAGS) | {"plaintext"})
    names = [t for t in names if not t.startswith("-") and len(t) <= 16]
    keys = sorted((_pack(t.encode()), t) for t in names)
    k1 = np.array([k[0][0] for k in keys], dtype=np.uint64)
    k2 = np.array([k[0][1] for k in keys], dtype=np.uint64)
    tag_names = [k[1] for k in keys]
    klen = np.array([len(t) for t in tag_names], dtype=np.int64)
    info = np.zeros((len(tag_names), 5), dtype=np.int64)  # category, ancestor bit, is a link, own index, flags
    for i, t in enumerate(tag_names):
        cat, bit, is_a, _tag, own = tag_info(t)
        flags = (FLAG_VOID if t in VOID_TAGS else 0) | (FLAG_RAW if t in RAW_TEXT_TAGS else 0)
        flags |= FLAG_PLAINTEXT if t == "plaintext" else 0
        info[i] = (cat, bit, int(is_a), own, flags)
    default = np.array([*INLINE[:2], int(INLINE[2]), SPAN_OTHER, 0], dtype=np.int64)
    # class words: bytes, grouped by their first two bytes (all have two or more), longest first (the regular
    # expression's alternation order: at a position the longest word that matches wins)
    words = sorted(enumerate(CLASS_WORDS), key=lambda iw: (iw[1].encode()[:2], -len(iw[1])))
    wbytes = np.zeros((len(words), max(len(w) for w in CLASS_WORDS)), dtype=np.uint8)
    wlen = np.zeros(len(words), dtype=np.int64)
    wbit = np.zeros(len(words), dtype=np.int64)
    for j, (i, w) in enumerate(words):
        assert len(w.encode()) >= 2, w
        wbytes[j, :len(w)] = np.frombuffer(w.encode(), dtype=np.uint8)
        wlen[j] = len(w)
        wbit[j] = i
    # words[pair_first[k]:pair_first[k + 1]] start with the bytes (k // 256, k % 256)
    counts = np.bincount([w.encode()[0] * 256 + w.encode()[1] for _, w in words], minlength=256 * 256)
    pair_first = np.zeros(256 * 256 + 1, dtype=np.int32)
    pair_first[1:] = np.cumsum(counts)
    roles = list(ROLE_BITS)
    rbytes = np.zeros((len(roles), max(map(len, roles))), dtype=np.uint8)
    rlen = np.zeros(len(roles), dtype=np.int64)
    rbits = np.zeros((len(roles), N_WORDS), dtype=np.uint64)
    for j, r in enumerate(roles):
        rbytes[j, :len(r)] = np.frombuffer(r.encode(), dtype=np.uint8)
        rlen[j] = len(r)
        rbits[j] = _split_bits(ROLE_BITS[r])
    body = tag_names.index("body")
    pre = tag_names.index("pre")
    widget = np.array(_split_bits(WIDGET_BITS), dtype=np.uint64)  # class words of tab and accordion widgets
    return (k1, k2, klen, info, default, wbytes, wlen, wbit, pair_first, rbytes, rlen, rbits, body, pre,
            widget), tag_names


TABLES, TAG_NAMES = _tables()


# ------------------------------------------------------------------------------------------ Python side


@dataclass
class Walked:
    """``walk``'s result as arrays, one row per block (``near`` and ``any``: class-word bit sets as
    ``N_WORDS`` little-endian uint64 words) and one per element."""
    texts: list[str]
    link: np.ndarray       # int64: chars of the block inside links (at most its chars)
    el: np.ndarray         # int64: the owner's element index
    own: np.ndarray        # int64: the owner's tag index in OWN_TAGS
    anc: np.ndarray        # int64: ancestor tag bits
    near: np.ndarray       # uint64 [n, N_WORDS]: class words of the owner, its owner and the inline elements
    any: np.ndarray        # uint64 [n, N_WORDS]: class words of every element above
    depth: np.ndarray      # int64: block elements above the owner
    tags: list[str]        # the owner's tag
    el_parent: np.ndarray  # int64, per element
    el_chars: np.ndarray   # int64: chars of the blocks below the element
    el_link: np.ndarray    # int64: link chars of those


def walk_arrays(tree) -> Walked:
    """``dom_walk.walk`` of a lexbor tree, as arrays: the compiled scan of its serialization where
    that one can read it, ``walk`` itself otherwise."""
    w = compiled_walk(tree)
    return w if w is not None else from_walk(*walk(tree))


def compiled_walk(tree) -> Walked | None:
    """The compiled walk (None where it gives up: then ``walk`` is the answer): over lexbor's nodes in memory
    where ``node_tables`` could check their layout, else over the body's serialization."""
    tables = node_tables()
    return node_walk(tree, tables) if tables is not None else serialized_walk(tree)


def node_walk(tree, tables: tuple) -> Walked | None:
    """``walk_nodes``: the compiled walk over the tree's nodes, read in lexbor's memory (the caller holds the
    tree while it runs). ``tables``: ``node_tables()``."""
    body = tree.body
    if body is None:
        return None
    size = rows = 0
    while True:
        ws = _workspace(size, rows)
        st, o, nbk, ne = walk_nodes(body.mem_id, ws.out, ws.blk, ws.bbits, ws.els, ws.scratch, TABLES,
                                    *tables, MAX_DEPTH)
        if st != NEED_ROOM:
            break
        size, rows = 2 * ws.size, 2 * ws.rows
    return _walked(ws, o, nbk, ne) if st == OK else None


_CHECK_PAGE = ("<div class='tabs main'><p id=a hidden>hidden</p><div class=tab-pane style='display: none'>panel"
               "</div></div><article role=main><h1>Title &amp; more</h1><p>é 東京 \U0001F600 &lt;&nbsp;<br>x"
               "<a href=/>link</a><custom-el>c</custom-el></p><pre>\n  code\n</pre><!--c--><ul><li>one<li>two</ul>"
               "</article><svg><title>t</title></svg><script>s</script>tail")
_NODE_TABLES: list = []


def node_tables() -> tuple | None:
    """``lexbor_layout.node_tables`` for the node walk, once it has also given ``walk``'s result on a page of
    most kinds of node; None (the serialization scan) otherwise."""
    if not _NODE_TABLES:
        tables = _layout_tables(TAG_NAMES)
        if tables is not None:
            tree = parse(_CHECK_PAGE)
            got = node_walk(tree, tables)
            if got is None or differs(got, from_walk(*walk(tree))) is not None:
                tables = None
        _NODE_TABLES.append(tables)
    return _NODE_TABLES[0]


def differs(a: Walked, b: Walked) -> str | None:
    """The first field in which two walks differ, or None."""
    for k in ("texts", "tags"):
        if getattr(a, k) != getattr(b, k):
            return k
    for k in ("link", "el", "own", "anc", "near", "any", "depth", "el_parent", "el_chars", "el_link"):
        x, y = getattr(a, k), getattr(b, k)
        if x.shape != y.shape or not np.array_equal(x, y):
            return k
    return None


def serialized_walk(tree) -> Walked | None:
    """``scan_body``: the compiled scan of the body's serialization."""
    buf = body_utf8(tree)
    if buf is None or buf.size == 0:
        return None
    rows = 0
    while True:
        ws = _workspace(buf.size, rows)
        st, o, nbk, ne = scan_body(buf, ws.out, ws.blk, ws.bbits, ws.els, ws.scratch, ws.scratch2, TABLES, MAX_DEPTH)
        if st != NEED_ROOM:
            break
        rows = 2 * ws.rows
    return _walked(ws, o, nbk, ne) if st == OK else None


def _walked(ws, o: int, nbk: int, ne: int) -> Walked | None:
    """The kernels' output in the workspace as ``Walked``."""
    try:
        s = ws.out[:o].tobytes().decode("utf-8")
    except UnicodeDecodeError:  # lone surrogates in the tree's text
        return None
    blk = ws.blk[:nbk].T.copy()
    bits = ws.bbits[:nbk]
    els = ws.els[:ne].T.copy()
    texts = [s[a:b] for a, b in zip(blk[B_CS].tolist(), blk[B_CE].tolist())]
    return Walked(texts, blk[B_LINK], blk[B_EL], blk[B_OWN], blk[B_ANC], bits[:, :N_WORDS].copy(),
                  bits[:, N_WORDS:].copy(), blk[B_DEPTH], [TAG_NAMES[i] for i in blk[B_TAG].tolist()],
                  els[E_PARENT], els[E_CHARS], els[E_LINK])


class _LexborStr(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t)]  # lexbor's lexbor_str_t


def _lexbor_serializer():
    """lexbor's ``lxb_html_serialize_tree_str`` from selectolax's extension (which exports it), or None.
    ``node.html`` calls it too, then decodes its UTF-8 into a ``str`` that the scan would encode again: a
    tenth of the walk's time on real pages. Checked against ``node.html`` on a page of every kind of
    character before it is used."""
    try:
        from selectolax import lexbor
        from selectolax.lexbor import LexborHTMLParser

        fn = ctypes.CDLL(lexbor.__file__).lxb_html_serialize_tree_str
    except (ImportError, OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_LexborStr)]
    fn.restype = ctypes.c_uint
    tree = LexborHTMLParser("<p class='a&amp;b'>é 東京 \U0001F600 &lt;&nbsp;<br><script>x<y</script></p>".encode())
    out = _LexborStr()
    if fn(tree.body.mem_id, ctypes.byref(out)) != 0 or not out.data:
        return None
    return fn if ctypes.string_at(out.data, out.length) == tree.body.html.encode() else None


_SERIALIZE = _lexbor_serializer()


def body_utf8(tree) -> np.ndarray | None:
    """lexbor's serialization of the page's body as UTF-8 bytes (None without a body): written by lexbor into
    memory of the tree's own (freed with the tree, which the caller holds while it reads them), read in place;
    through ``node.html`` where the serializer cannot be called directly."""
    body = tree.body
    if body is None:
        return None
    if _SERIALIZE is None:
        html = body.html
        return np.frombuffer(html.encode("utf-8", "surrogatepass"), dtype=np.uint8) if html else None
    out = _LexborStr()
    if _SERIALIZE(body.mem_id, ctypes.byref(out)) != 0:
        return None
    if not out.data or not out.length:
        return np.zeros(0, dtype=np.uint8)
    return np.frombuffer((ctypes.c_uint8 * out.length).from_address(out.data), dtype=np.uint8)


class _Workspace(threading.local):
    """The scan's buffers, kept per thread and grown to the largest page seen: fresh multi-megabyte arrays
    on every page would cost more (page faults) than the scan itself."""
    size = -1
    rows = -1

    def fit(self, size: int, rows: int):
        if size > self.size:
            self.size = max(size, min(2 * self.size, KEEP_BYTES), 1 << 16)
            self.out = np.empty(self.size + 8, dtype=np.uint8)
            self.scratch = np.empty(self.size + 8, dtype=np.uint8)
            self.scratch2 = np.empty(2 * self.size + 16, dtype=np.uint8)
        if rows > self.rows:
            self.rows = max(rows, min(2 * self.rows, KEEP_ROWS), 1 << 12)
            self.blk = np.empty((self.rows, 8), dtype=np.int64)
            self.bbits = np.empty((self.rows, 2 * N_WORDS), dtype=np.uint64)
            self.els = np.empty((self.rows, 3), dtype=np.int64)
        return self


_WS = _Workspace()
KEEP_BYTES = 1 << 22  # buffers for pages up to this size (stripped, serialized) are kept between pages
KEEP_ROWS = 1 << 17


def _workspace(size: int, rows: int) -> _Workspace:
    if size > KEEP_BYTES or rows > KEEP_ROWS:
        return _Workspace().fit(size, rows)  # a page this large is rare: its buffers go with it
    return _WS.fit(size, rows)


def from_walk(blocks: list[tuple], el_parent: list, el_chars: list, el_link: list) -> Walked:
    """``walk``'s lists as ``Walked``."""
    n = len(blocks)
    cols = list(map(list, zip(*blocks))) if n else [[] for _ in range(9)]
    texts, link, el, own, anc, near, any_, depth, tags = cols

    def words(values):
        return np.array([_split_bits(v) for v in values], dtype=np.uint64).reshape(n, N_WORDS)

    i64 = np.int64
    return Walked(texts, np.array(link, dtype=i64), np.array(el, dtype=i64), np.array(own, dtype=i64),
                  np.array(anc, dtype=i64), words(near), words(any_), np.array(depth, dtype=i64), tags,
                  np.array(el_parent, dtype=i64), np.array(el_chars, dtype=i64), np.array(el_link, dtype=i64))
