"""The block walk over lexbor's tree in Python: the definition of the blocks, and the fallback of the
compiled scan (``dom_scan``) on the pages that one cannot read."""
from __future__ import annotations

from curate.extract.tags import (CLASS_MASK_CACHE, HIDDEN_BIT, OWN_INDEX, ROLE_BITS, SPAN_OTHER, TEXT_ID, WIDGET_BITS,
                                 class_mask, id_info, is_hidden, tag_info)

MAX_DEPTH = 200  # elements below this depth are read as plain text (real pages nest 10-40 deep)


def parse(html: str | None, data: bytes | None = None):
    """lexbor (selectolax) tree of the (already stripped) HTML, or None. ``data``: ``utf8(html)`` when the
    caller has it (lexbor then parses those bytes instead of encoding the text again); ``html`` may then be
    None."""
    from selectolax.lexbor import LexborHTMLParser

    if html is None:  # only the bytes (a page of white space gives no block either way)
        if not data or data.isspace():
            return None
    elif not html or html.isspace():
        return None
    try:
        tree = LexborHTMLParser(html if data is None else data)
    except Exception:  # selectolax raises on a few unparsable inputs; that page has no text then
        return None
    return tree if tree.body is not None else None


# a <br> in the text of a block that is not <pre> (a text node never holds NUL: the tree builder drops it)
BR_MARK = "\x00"


def _flush(raw: str, owner: tuple, link: int, ea: int, en: int, blocks: list, el_chars: list, el_link: list):
    """Write the text collected since the last block boundary as a block of ``owner`` (unless it is blank)."""
    if owner[6] != "pre":  # white space collapsed, a line per <br> (BR_MARK) that has text on both sides
        text = " ".join(raw.split()) if BR_MARK not in raw else "\n".join(
            filter(None, [" ".join(line.split()) for line in raw.split(BR_MARK)]))
        if not text:
            return
    else:
        text = raw.strip("\n")
        if not text or text.isspace():
            return
    n = len(text)
    lk = link if link < n else n
    ei = owner[0]
    blocks.append((text, lk, ei, owner[1], owner[2] | ea, owner[3] | en, owner[4] | en, owner[5], owner[6]))
    el_chars[ei] += n
    el_link[ei] += lk


# One function: a hot loop over every node of the page whose state (owner, bits, link chars) lives in its
# locals; split into calls, that state would cross a function boundary per node.
def walk(tree):
    """One pass over the tree: (blocks, element parents, element chars, element link chars).

    A block is ``(text, link chars, owner's element index, owner's tag index, ancestor tag bits, near class
    bits, any class bits, depth, tag)``; its *owner* is the nearest block-level element above its text (or
    the body), a tuple (element index, own tag index, ancestor tag bits, near class bits, any class bits,
    depth, tag, own class bits); the block's bits are its owner's with those of the inline elements its
    text passed through. Text of inline elements joins the current block; the block is written when a
    block-level element starts or ends. Iterative (an explicit stack): deep pages cost no recursion; below
    MAX_DEPTH levels an element's text is read as one run."""
    el_parent = [-1]
    el_chars = [0]
    el_link = [0]
    blocks: list[tuple] = []
    parts: list[str] = []
    owner = (0, OWN_INDEX.get("body", SPAN_OTHER), 0, 0, 0, 0, "body", 0)
    body_owner = owner
    link = extra_anc = extra_near = 0
    anc = cls_any = 0
    in_link = False
    level = 1
    stack: list[tuple] = []
    info_of = id_info().copy()  # per page: lexbor gives tags it does not know ids of that page's own
    class_of = CLASS_MASK_CACHE.get
    c = tree.body.child
    while True:
        if c is None:
            if not stack:
                break
            c, owner, anc, cls_any, in_link, level, block = stack.pop()
            if block is not None and parts:
                raw = "".join(parts)
                if not raw.isspace():  # blank: no block
                    _flush(raw, block, link, extra_anc, extra_near, blocks, el_chars, el_link)
                parts = []
                link = extra_anc = extra_near = 0
            c = c.next
            continue
        tid = c.tag_id
        if tid == TEXT_ID:
            t = c.text_content
            if t:
                parts.append(t)
                if in_link:
                    link += len(t)
            c = c.next
            continue
        info = info_of.get(tid)
        if info is None:
            info = info_of[tid] = tag_info(c.tag)
        cat, bit, is_a, tag, own_index = info
        if cat >= 3:
            if cat == 4:  # br: a line break (in a <pre>, its "\n")
                parts.append("\n" if owner[6] == "pre" else BR_MARK)
            c = c.next
            continue
        attrs = c.attributes
        cm = _class_bits(attrs, class_of) if attrs else 0
        if cm < 0:  # hidden: inside a tab or accordion widget (its other panels) read and marked; else skipped
            cm = ~cm
            if not (cm | cls_any) & WIDGET_BITS:
                c = c.next
                continue
            bit |= HIDDEN_BIT
        if cat == 1 and parts:  # a block starts: the text before it is a block of its own
            raw = "".join(parts)
            if not raw.isspace():  # blank: no block
                _flush(raw, owner, link, extra_anc, extra_near, blocks, el_chars, el_link)
            parts = []
            link = extra_anc = extra_near = 0
        first = c.child
        if first is None and level <= MAX_DEPTH:  # nothing inside: no need to go down and back up
            if cat == 1:
                el_parent.append(owner[0])
                el_chars.append(0)
                el_link.append(0)
            else:
                if cm:
                    extra_near |= cm
                extra_anc |= bit
            c = c.next
            continue
        canc = anc | bit
        cany = cls_any | cm
        if cat == 1:  # block
            new = (len(el_parent), own_index, canc, cm | owner[7], cany, owner[5] + 1, tag, cm)
            el_parent.append(owner[0])
            el_chars.append(0)
            el_link.append(0)
            stack.append((c, owner, anc, cls_any, in_link, level, new))
            owner = new
        else:  # inline: joins the current block
            if cm:
                extra_near |= cm
            extra_anc |= bit
            stack.append((c, owner, anc, cls_any, in_link, level, None))
        anc, cls_any, in_link = canc, cany, in_link or is_a
        if level > MAX_DEPTH:
            # deeper than real pages go (10-40): the rest of this subtree is one run of text
            parts.append(" " + c.text(deep=True, separator=" ") + " ")
            c = None
        else:
            level += 1
            c = first
    if parts:
        raw = "".join(parts)
        if not raw.isspace():  # blank: no block
            _flush(raw, body_owner, link, extra_anc, extra_near, blocks, el_chars, el_link)
    _add_to_parents(el_parent, el_chars, el_link)
    return blocks, el_parent, el_chars, el_link


def _class_bits(attrs: dict, class_of) -> int:
    """The class-word and role bits of an element's ``class``, ``id`` and ``role``; ``~bits`` (negative) when
    the element is hidden (``is_hidden``)."""
    cm = 0
    cls = attrs.get("class")
    if cls:
        cm = class_of(cls)
        if cm is None:
            cm = class_mask(cls)
    eid = attrs.get("id")
    if eid:
        m = class_of(eid)
        cm |= class_mask(eid) if m is None else m
    if "style" in attrs or "hidden" in attrs or "role" in attrs:
        role = attrs.get("role")
        if role in ROLE_BITS:
            cm |= ROLE_BITS[role]
        if is_hidden(attrs):
            return ~cm
    return cm


def _add_to_parents(el_parent: list, el_chars: list, el_link: list) -> None:
    """Each element's chars and link chars counted into its ancestors' (children come after their parent)."""
    for i in range(len(el_parent) - 1, 0, -1):
        p = el_parent[i]
        el_chars[p] += el_chars[i]
        el_link[p] += el_link[i]
