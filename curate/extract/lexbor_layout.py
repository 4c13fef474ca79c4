"""Where lexbor keeps what the compiled node walk (``dom_scan_kernel.walk_nodes``) reads, checked on a sample
page against what selectolax's API says before the walk may read lexbor's memory, and lexbor's ids of the
tags and attributes it looks for.

The walk follows raw pointers: with a lexbor whose structs are laid out otherwise it would read the wrong
memory. So each offset is first compared with selectolax (a node's next sibling, first child, tag id and text
as ``node.next``, ``node.child``, ``node.tag_id`` and ``node.text_content`` give them), reading only within the
nodes selectolax hands out; a pointer is followed only once the field it is read from has been checked that way.
Where anything differs, ``node_tables`` returns None and the serialization scan does the work.
"""
from __future__ import annotations

import ctypes

import numpy as np

from curate.extract.dom_scan_kernel import (A_NEXT, A_QUALIFIED_NAME, A_VALUE, ATTR_CLASS, ATTR_HIDDEN, ATTR_ID,
                                            ATTR_ROLE, ATTR_STYLE, E_FIRST_ATTR, E_QUALIFIED_NAME, ELEMENT_NODE,
                                            H_LENGTH, N_FIRST_CHILD, N_LOCAL_NAME, N_NEXT, N_TYPE, SHORT_NAME,
                                            STATIC_IDS, T_DATA, T_LENGTH, TEXT_NODE)

COMMENT_NODE = 8
E_ATTR_ID, E_ATTR_CLASS = 136, 144  # lxb_dom_element_t's shortcuts to its id and class attributes
A_OWNER = 120                       # lxb_dom_attr_t: its element
ATTR_NAMES = {"class": ATTR_CLASS, "id": ATTR_ID, "hidden": ATTR_HIDDEN, "style": ATTR_STYLE, "role": ATTR_ROLE}
_PAGE = "<div id='ab' class='cd' role='main' hidden style='x:y'>t&amp;x<my-tag>q</my-tag></div><!--c--><p>é</p>"


def _word(addr: int, offset: int) -> int:
    return ctypes.c_int64.from_address(addr + offset).value


def _word32(addr: int, offset: int) -> int:
    return ctypes.c_uint32.from_address(addr + offset).value


def _name(name_id: int) -> bytes | None:
    """The name stored in the hash entry at ``name_id`` (a tag or attribute lexbor does not know)."""
    n = _word(name_id, H_LENGTH)
    return ctypes.string_at(name_id, n) if 0 < n <= SHORT_NAME else None


def _attrs(element: int) -> list[tuple[int, bytes | None]]:
    """(name id, value) of an element's attributes, in order (the layout checked)."""
    out = []
    a = _word(element, E_FIRST_ATTR)
    while a and len(out) < 64:
        v = _word(a, A_VALUE)
        name_id = _word(a, A_QUALIFIED_NAME) or _word(a, N_LOCAL_NAME)
        out.append((name_id, ctypes.string_at(_word(v, 0), _word(v, 8)) if v else None))
        a = _word(a, A_NEXT)
    return out


def layout_ok() -> bool:
    """Whether this lexbor's nodes are laid out as the walk reads them (see the module's doc)."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(_PAGE.encode())
    body = tree.body
    div = body.child
    text, comment = div.child, div.next
    my_tag, p = text.next, comment.next
    d, t = div.mem_id, text.mem_id
    # the node fields (within the node structs selectolax hands out; no pointer followed yet)
    if not (_word(body.mem_id, N_FIRST_CHILD) == d and _word(d, N_NEXT) == comment.mem_id
            and _word(d, N_FIRST_CHILD) == t and _word(t, N_NEXT) == my_tag.mem_id
            and _word(comment.mem_id, N_NEXT) == p.mem_id and _word(my_tag.mem_id, N_NEXT) == 0
            and _word(p.mem_id, N_FIRST_CHILD) == p.child.mem_id and _word(d, N_LOCAL_NAME) == div.tag_id
            and _word(my_tag.mem_id, N_LOCAL_NAME) == my_tag.tag_id and 0 < div.tag_id < STATIC_IDS
            and my_tag.tag_id >= STATIC_IDS and _word32(d, N_TYPE) == ELEMENT_NODE
            and _word32(t, N_TYPE) == TEXT_NODE and _word32(comment.mem_id, N_TYPE) == COMMENT_NODE
            and _word(t, T_LENGTH) == 3 and _word(p.child.mem_id, T_LENGTH) == 2):
        return False
    # the text itself, the element's attribute fields, then the attributes
    first = _word(d, E_FIRST_ATTR)
    if not (ctypes.string_at(_word(t, T_DATA), 3) == b"t&x" and first and _word(d, E_ATTR_ID) == first
            and _word(d, E_ATTR_CLASS) not in (0, first) and _word(d, E_QUALIFIED_NAME) == 0
            and _word(first, A_OWNER) == d):
        return False
    attrs = _attrs(d)
    if [v for _, v in attrs] != [b"ab", b"cd", b"main", None, b"x:y"] or _name(attrs[2][0]) != b"role":
        return False
    return _name(my_tag.tag_id) == b"my-tag" and _word(my_tag.mem_id, E_QUALIFIED_NAME) == 0


def node_tables(tag_names: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(row in ``tag_names`` of each of lexbor's own tag ids, -1 for none; ``ATTR_*`` of each of its own
    attribute ids), or None where ``layout_ok`` is not. An id is lexbor's own when two documents, made in
    another order, give it the same (one it does not know gets an id of its own per document)."""
    try:
        from selectolax.lexbor import LexborHTMLParser

        if not layout_ok():
            return None
    except Exception:  # an older selectolax without these attributes: the serialization scan
        return None
    a, b = LexborHTMLParser(""), LexborHTMLParser("")
    ids_b = {name: b.create_node(name).tag_id for name in reversed(tag_names)}
    static = {}
    for row, name in enumerate(tag_names):
        i = a.create_node(name).tag_id
        if i == ids_b[name] and 0 <= i < STATIC_IDS:
            static[i] = row
    tag_rows = np.full(max(static, default=0) + 1, -1, dtype=np.int64)
    for i, row in static.items():
        tag_rows[i] = row
    names = list(ATTR_NAMES)
    ids = []
    for order in (names, names[::-1]):
        tree = LexborHTMLParser(("<div " + " ".join(f"{n}=x" for n in order) + ">").encode())
        ids.append(dict(zip(order, (i for i, _ in _attrs(tree.body.child.mem_id)))))
    attr_static = {ids[0][n]: ATTR_NAMES[n] for n in names if ids[0][n] == ids[1][n] and ids[0][n] < STATIC_IDS}
    attr_kinds = np.zeros(max(attr_static, default=0) + 1, dtype=np.int64)
    for i, kind in attr_static.items():
        attr_kinds[i] = kind
    return tag_rows, attr_kinds
