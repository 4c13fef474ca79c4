"""A page's blocks and the features the learned block classifier reads.

A **block** is a run of text between block-level element boundaries (a paragraph, heading, list item,
table cell, ...). Text inside inline elements (``a``, ``span``, ``b``, ...) joins its block; ``br`` is a line
break inside the block. Each block gets one row of numeric, language-neutral features:

- its own text: characters, words, share of characters inside links, digits, sentence punctuation
  (Latin, CJK, Arabic, Devanagari full stops), commas, separators (``|``, ``»``, ``·``), how often the same
  text occurs on the page; a character of a script written without spaces (Han, kana, Thai, ...) counts
  as the Latin characters and words it stands for (``_text_stats``), so lengths and marks per word mean
  the same in every script;
- its place in the DOM: the tag that owns it, which tags are above it (``nav``, ``footer``, ``li``,
  ``article``, ...), which words occur in the class / id attributes of it and of its ancestors (``menu``,
  ``comment``, ``content``, ``price``, ...), depth;
- its containers: text size and link density of the elements 1, 2 and 4 levels up;
- position on the page, the same text features of the two blocks before and after it;
- the page: total text, link density, share of text in lists and tables, Open Graph type.

The page is stripped (``strip``), parsed by lexbor (``dom_walk.parse``) and walked once (``dom_scan``: a
compiled scan of lexbor's serialization, with the Python ``dom_walk.walk`` as its definition and fallback).
The per-block arithmetic is compiled (numba): scans over the code points of all blocks at once for the
text statistics (``_text_counts``, ``_text_columns``) and the title overlap (``_title_counts``), the
container ancestors (``_ancestors``), and one pass that writes the feature matrix row by row (``_fill``);
the sums over the page stay numpy's. ``benchmarks/extract_features_check.py`` checks that a change leaves
the features of WCXB's development pages as they were (the shipped model reads them).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numba as nb
import numpy as np

from curate.extract.ascii import COLON, NEWLINE, NUL, SPACE
from curate.extract.chars import (CLASS_TABLE, IS_COMMA, IS_DIGIT, IS_SENTENCE, IS_SEPARATOR, IS_UPPER, IS_WORD,
                                  LOWER_TABLE, SPECIAL_LOWER, UNKNOWN, classes, lowers)
from curate.extract.dom_scan import walk_arrays
from curate.extract.dom_walk import parse
from curate.extract.strip import strip_html
from curate.extract.tags import ANC_BIT, ANCESTOR_TAGS, CLASS_WORDS, OWN_INDEX, OWN_TAGS

_OG_TYPE_RE = re.compile(r"""og:type["']?\s+content=["']?([\w.:-]+)""", re.I)
_OG_TYPES = ["article", "product", "website", "blog", "profile", "video", "book"]
_WORD_RE = re.compile(r"\w+")


@dataclass
class Blocks:
    texts: list[str]          # one string per block, whitespace collapsed
    features: np.ndarray      # float32 [n_blocks, n_features]
    tags: list[str]           # owning tag per block (for output layout and headings)
    groups: np.ndarray        # int64 [n_blocks, 4]: the element 1, 2, 4 and 8 levels above each block's owner
    owner: np.ndarray         # int64 [n_blocks]: each block's owning element (elements in document order)
    parent: np.ndarray        # int64 [n_elements]: each element's parent (-1 at the root)


@nb.njit(cache=True)
def _ancestors(el_parent, idx, levels):
    """Per element of ``idx`` and level k of ``levels`` (increasing): its ancestor k levels up (the root where
    the chain ends sooner)."""
    out = np.empty((idx.size, levels.size), dtype=np.int64)
    for i in range(idx.size):
        a = idx[i]
        up = 0
        for t in range(levels.size):
            while up < levels[t]:
                nxt = el_parent[a]
                if nxt >= 0:
                    a = nxt
                up += 1
            out[i, t] = a
    return out


def _title_overlap(texts: list[str], title: str, n_chars: np.ndarray | None = None,
                   cps: np.ndarray | None = None) -> np.ndarray:
    """Per block: share of its words in the page title, share of the title's words in it (blocks of up to
    300 characters; words: lower-cased ``\\w+``, each counted once). One compiled scan over the code points
    of all blocks (``_title_counts``; ``n_chars`` and ``cps``: each block's length and the code points of the
    "\\x00"-joined blocks, as ``_text_stats`` reads them): each code point lower-cased through
    ``chars.LOWER_TABLE``, each word a run of word characters (``classes``, the same ``\\w`` as ``re``) told
    apart by a 64-bit polynomial hash of its code points (``_word_hash``; two different words of one block
    sharing a hash: odds about 1e-17). A page whose short blocks hold a code point that ``str.lower`` maps in
    context or to more than one (``Σ``, ``İ``) is counted block by block in Python."""
    tw = set(_WORD_RE.findall(title.lower()))
    out = np.zeros((len(texts), 2), dtype=np.float32)
    if not tw:
        return out
    if cps is None:
        n_chars, cps = _code_points(texts)
    title_key = np.sort(_hashes(np.frombuffer("\x00".join(tw).encode("utf-32-le", "surrogatepass"),
                                              dtype=np.uint32), len(tw)))
    ok, n_words, common = _title_counts(cps, n_chars, LOWER_TABLE, CLASS_TABLE, title_key, SPECIAL_LOWER)
    if ok == 0:  # code points not seen before: look them up, then count
        lowers(cps)
        ok, n_words, common = _title_counts(cps, n_chars, LOWER_TABLE, CLASS_TABLE, title_key, SPECIAL_LOWER)
    if ok < 0:
        for i, t in enumerate(texts):
            bw = set(_WORD_RE.findall(t.lower())) if len(t) <= _SHORT else None
            if bw:
                hit = len(bw & tw)
                out[i] = hit / len(bw), hit / len(tw)
        return out
    has = np.flatnonzero(n_words)
    common = common.astype(np.float64)
    out[has, 0] = common[has] / n_words[has]
    out[has, 1] = common[has] / len(tw)
    return out


_HASH_BASE = 0x100000001B3
_SHORT = 300  # characters of the longest block whose title overlap is counted
_HASH_SLOTS = 1 << 9  # more than the words a block of _SHORT characters holds, twice over


def _word_hash(word: str) -> int:
    """``sum cp[k] * B**k`` modulo 2**64 over the code points of ``word`` (what ``_title_counts`` computes)."""
    return sum(ord(ch) * pow(_HASH_BASE, k, 2**64) for k, ch in enumerate(word)) % 2**64


@nb.njit(cache=True)
def _hashes(cps, n):
    """``_word_hash`` of the n "\\x00"-joined words of ``cps``."""
    out = np.zeros(n, dtype=np.uint64)
    base = np.uint64(_HASH_BASE)
    w = 0
    p = np.uint64(1)
    for cp in cps:
        if cp == NUL:
            w += 1
            p = np.uint64(1)
            if w == n:
                break
        else:
            out[w] += np.uint64(cp) * p
            p *= base
    return out


@nb.njit(cache=True)
def _title_counts(cps, n_chars, lower, table, title_key, special):
    """One pass over the code points of the "\\x00"-joined blocks (``n_chars``: their lengths), those of
    ``_SHORT`` characters or fewer, lower-cased (``lower``): per block, how many distinct words (runs of
    ``\\w``, told apart by ``_word_hash``, de-duplicated in a small hash set) and how many of them are in
    ``title_key`` (sorted). ok: 1; 0 when a code point is not in ``lower`` (or its lower case not in ``table``)
    yet; -1 when one lower-cases in context or to more than one code point (``special`` in ``lower``)."""
    n = n_chars.size
    n_words = np.zeros(n, dtype=np.int64)
    common = np.zeros(n, dtype=np.int64)
    slots = np.zeros(_HASH_SLOTS, dtype=np.uint64)
    used = np.zeros(_HASH_SLOTS, dtype=np.bool_)
    filled = np.empty(_HASH_SLOTS, dtype=np.int64)
    base = np.uint64(_HASH_BASE)
    mask = _HASH_SLOTS - 1
    pos = 0
    for b in range(n):
        start = pos
        stop = pos + n_chars[b]
        pos = stop + 1
        if n_chars[b] > _SHORT:
            continue
        m = 0  # slots filled by this block
        distinct = 0
        hit = 0
        h = np.uint64(0)
        p = np.uint64(1)
        in_word = False
        for i in range(start, stop + 1):
            w = False
            cp = np.uint32(0)
            if i < stop and cps[i] != NUL:  # a NUL inside a block: neither a word character nor cased
                cp = lower[cps[i]]
                if cp == 0:
                    return 0, n_words, common
                if cp == special:
                    return -1, n_words, common
                k = table[cp]
                if k == UNKNOWN:
                    return 0, n_words, common
                w = (k & IS_WORD) != 0
            if w:
                if not in_word:
                    in_word = True
                    h = np.uint64(0)
                    p = np.uint64(1)
                h += np.uint64(cp) * p
                p *= base
                continue
            if not in_word:
                continue
            in_word = False
            s = np.int64(h ^ (h >> np.uint64(29))) & mask
            while used[s] and slots[s] != h:
                s = (s + 1) & mask
            if used[s]:
                continue
            used[s] = True
            slots[s] = h
            filled[m] = s
            m += 1
            distinct += 1
            for t in range(title_key.size):  # a title has a few words: a loop beats a binary search
                if title_key[t] == h:
                    hit += 1
                    break
        for j in range(m):
            used[filled[j]] = False
        n_words[b] = distinct
        common[b] = hit
    return 1, n_words, common


def _code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(each block's length in code points, the code points of the "\\x00"-joined blocks)."""
    n_chars = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    return n_chars, np.frombuffer("\x00".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


# Scripts written without spaces between words. Their characters are counted as the Latin characters and
# words they stand for, so a paragraph of Chinese or Thai has about the lengths, word counts and
# punctuation per word of the same paragraph in English (the model was trained on pages with spaces):
# a Han / kana character is about 1.7 characters of a word (mean Chinese word length in corpora is 1.6-1.8),
# a Thai, Lao, Khmer or Myanmar letter about a quarter of a word (vowel signs and tone marks not counted);
# an English word with its space is about six characters. Only word characters (``\w``) count.
LATIN_WORD_CHARS = 6.0
CJK_WORD_CHARS = 1.7
SEA_WORD_CHARS = 4.0


def _text_stats(texts: list[str], link: np.ndarray, pre: np.ndarray, n_chars: np.ndarray | None = None,
                cps: np.ndarray | None = None):
    """Per-block text features, counted by one compiled scan over the page's code points (``_text_counts``).
    ``pre``: blocks whose white space was kept (``<pre>``); the others hold single spaces between words.
    Returns (features [n, N_TEXT], raw characters per block, Latin-equivalent characters per block): lengths, words and tokens count a character
    of a script without spaces (``_dense_script``) as the Latin text it stands for; shares of characters
    (links, digits) are of the raw characters."""
    n = len(texts)
    if cps is None:
        n_chars, cps = _code_points(texts)
    chars = n_chars
    ok, counts, ends = _text_counts(cps, CLASS_TABLE, chars)
    if not ok:  # code points not seen before: fill their classes, then count
        classes(cps)
        ok, counts, ends = _text_counts(cps, CLASS_TABLE, chars)
    # words (str.split): single spaces or line breaks between them, except in <pre> blocks
    pre_words = np.full(n, -1, dtype=np.int64)
    for i in np.flatnonzero(pre):
        pre_words[i] = len(texts[i].split())
    return _text_columns(counts, ends, chars, np.asarray(link, dtype=np.float32), pre_words,
                         np.float32(CJK_WORD_CHARS), np.float32(SEA_WORD_CHARS), np.float32(LATIN_WORD_CHARS))


@nb.njit(cache=True)
def _text_columns(counts, ends, n_chars, link, pre_words, cjk_word, sea_word, latin_word):
    """The N_TEXT columns of ``_text_stats`` from the counts of ``_text_counts``, in float32 (as numpy
    would compute them column by column). ``pre_words``: the words of a ``pre`` block (-1 for the others,
    whose words are their spaces plus one)."""
    n = counts.shape[0]
    ts = np.empty((n, N_TEXT), dtype=np.float32)
    raw = np.empty(n, dtype=np.float32)
    eq = np.empty(n, dtype=np.float32)
    one = np.float32(1.0)
    for i in range(n):
        wtok = np.float32(counts[i, 0])
        digits = np.float32(counts[i, 1])
        sent = np.float32(counts[i, 2])
        seps = np.float32(counts[i, 3])
        comma = np.float32(counts[i, 4])
        cjk = np.float32(counts[i, 6])
        sea = np.float32(counts[i, 7])
        words = np.float32(pre_words[i]) if pre_words[i] >= 0 else np.float32(counts[i, 5]) + one
        dense = cjk / cjk_word + sea / sea_word
        words = words + dense
        wtok = wtok + dense
        r = np.float32(n_chars[i])
        chars = r + dense * latin_word - cjk - sea
        raw[i] = r
        eq[i] = chars
        per_word = max(words, one)
        row = ts[i]
        row[0] = np.log1p(chars)
        row[1] = np.log1p(words)
        row[2] = np.log1p(wtok)
        row[3] = link[i] / max(r, one)
        row[4] = np.log1p(sent)
        row[5] = sent / per_word
        row[6] = np.log1p(comma)
        row[7] = np.log1p(seps)
        row[8] = digits / max(r, one)
        row[9] = np.float32(ends[i, 0])
        row[10] = np.float32(ends[i, 1])
        row[11] = np.float32(ends[i, 2])
        row[12] = chars / per_word / np.float32(10.0)
        row[13] = wtok / per_word
    return ts, raw, eq


@nb.njit(cache=True)
def _dense_script(cp):
    """1: Han, kana (CJK: no spaces between words); 2: Thai, Lao, Myanmar, Khmer (spaces between phrases
    only); 0: any other code point."""
    if (0x3040 <= cp <= 0x30FF or 0x31F0 <= cp <= 0x31FF or 0x3400 <= cp <= 0x4DBF or 0x4E00 <= cp <= 0x9FFF
            or 0xF900 <= cp <= 0xFAFF or 0xFF66 <= cp <= 0xFF9F or 0x20000 <= cp <= 0x3FFFF):
        return 1
    if 0x0E00 <= cp <= 0x0EFF or 0x1000 <= cp <= 0x109F or 0x1780 <= cp <= 0x17FF:
        return 2
    return 0


@nb.njit(cache=True)
def _dense_counts(cps):
    """(CJK code points, south-east Asian code points) of ``cps`` (``_dense_script``)."""
    cjk = 0
    sea = 0
    for cp in cps:
        d = _dense_script(cp)
        if d == 1:
            cjk += 1
        elif d == 2:
            sea += 1
    return cjk, sea


def dense_words(text: str) -> float:
    """The words that the characters of ``text`` in scripts written without spaces stand for
    (``CJK_WORD_CHARS`` / ``SEA_WORD_CHARS`` characters a word), as the block features count them."""
    cjk, sea = _dense_counts(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32))
    return cjk / CJK_WORD_CHARS + sea / SEA_WORD_CHARS


@nb.njit(cache=True)
def _text_counts(cps, table, chars):
    """One pass over the code points of the "\\x00"-joined blocks (``chars``: each block's length; the
    separator after a block belongs to it). Per block: counts of word starts (``\\w`` after a non-word code
    point), digits, sentence marks (a space between two Thai or Lao code points counts as one: those scripts
    end phrases with a space), separators, commas, spaces (``_char_class`` bits), CJK and south-east
    Asian code points (``_dense_script``); and whether its first code point is upper case, its last a
    sentence mark, its last a colon. ok = False when a code point's class is not in ``table`` yet (255)."""
    n = chars.size
    counts = np.zeros((n, 8), dtype=np.int64)
    ends = np.zeros((n, 3), dtype=np.int64)
    i = 0
    prev_w = False
    for b in range(n):
        start = i
        stop = i + chars[b] + 1
        if stop > cps.size:
            stop = cps.size
        for j in range(start, stop):
            cp = cps[j]
            k = table[cp]
            if k == UNKNOWN:
                return False, counts, ends
            w = (k & IS_WORD) != 0
            if w and not prev_w:
                counts[b, 0] += 1
            prev_w = w
            if k & IS_DIGIT:
                counts[b, 1] += 1
            if k & IS_SENTENCE:
                counts[b, 2] += 1
            if k & IS_SEPARATOR:
                counts[b, 3] += 1
            if k & IS_COMMA:
                counts[b, 4] += 1
            if cp == SPACE or cp == NEWLINE:  # words: one more than the spaces, and the line breaks (<br>)
                counts[b, 5] += 1
                # Thai and Lao mark the end of a phrase or sentence with a space, not a character
                if (j > start and j + 1 < stop and 0x0E00 <= cps[j - 1] <= 0x0EFF
                        and 0x0E00 <= cps[j + 1] <= 0x0EFF):
                    counts[b, 2] += 1
            elif w and cp >= 0x0E00:
                d = _dense_script(cp)
                if d:
                    counts[b, 5 + d] += 1
        last = start + chars[b] - 1
        if last < 0:
            last += cps.size
        if start < cps.size:
            ends[b, 0] = (table[cps[start]] & IS_UPPER) != 0
        ends[b, 1] = (table[cps[last]] & IS_SENTENCE) != 0
        ends[b, 2] = cps[last] == COLON
        i = stop
    return True, counts, ends


N_TEXT = 14
GROUP_LEVELS = (1, 2, 4, 8)


def _og_type(html: str | None, data: bytes | None) -> str:
    """The page's Open Graph type (lower case), looked for in its first 20,000 characters; "" when none."""
    if html is None:
        # the first 20,000 characters lie in the first 80,000 bytes (a character an "ignore" drops at that cut
        # lies beyond them); only ASCII matches "og:type" under re.I, so without those bytes (in any case)
        # there is none
        head = np.frombuffer(data, dtype=np.uint8, count=min(len(data), 80000))
        at = data.find(b"og:type", 0, head.size)  # in lower case, as it mostly is; another case before it?
        first = _first_og_type(head[:at] if at >= 0 else head)  # (the name cannot overlap itself)
        at = first if first >= 0 else at
        if at < 0:
            return ""
        # a match starts at an "og:type": where the first one starts the match and the match ends before a
        # short window does, that match is the leftmost one (the characters before it: the bytes that start
        # a character)
        window = data[at:at + _OG_WINDOW].decode("utf-8", "ignore")
        m = _OG_TYPE_RE.match(window)
        if m is not None and m.end() < len(window) and (
                np.count_nonzero((head[:at] & 0xC0) != 0x80) + m.end() <= 20000):
            return m.group(1).lower()
        html = data[:80000].decode("utf-8", "ignore")
    m = _OG_TYPE_RE.search(html, 0, 20000)
    return m.group(1).lower() if m else ""


_OG_WINDOW = 512
_LOWER_BIT = 0x20  # ASCII letters: upper | 0x20 is lower (and nothing else gives a letter of "og:type")


def _first_og_type(head: np.ndarray) -> int:
    """Byte index of the first "og:type", ASCII letters in any case, in ``head``; -1 when none."""
    colon = np.flatnonzero(head[2:head.size - 4] == COLON) + 2
    if colon.size == 0:
        return -1
    hit = colon[((head[colon - 2] | _LOWER_BIT) == ord("o")) & ((head[colon - 1] | _LOWER_BIT) == ord("g"))]
    for k, ch in enumerate("type", 1):
        if hit.size == 0:
            return -1
        hit = hit[(head[hit + k] | _LOWER_BIT) == ord(ch)]
    return int(hit[0]) - 2 if hit.size else -1


# blocks of one page beyond which it is not classified (the rules engine reads it): real pages have at most a
# few thousand (2,641 in WCXB and Readability's largest), and the feature matrix of a crafted one grows with
# them (400,000 one-letter paragraphs, a 1.6 MB page, took 2.3 GB and 8 s)
MAX_BLOCKS = 20_000


def features(html: str | None, stripped: bool = False, data: bytes | None = None) -> Blocks | None:
    """The blocks of a page and their feature matrix; None when the page has no text, or more than
    ``MAX_BLOCKS`` blocks. ``data``: the stripped page's ``utf8`` bytes, when the caller has them (then
    ``html`` may be None)."""
    if html is not None and not stripped:
        html = strip_html(html)
        data = None
    og = _og_type(html, data)
    tree = parse(html, data)
    if tree is None:
        return None
    w = walk_arrays(tree)
    n = len(w.texts)
    if n == 0 or n > MAX_BLOCKS:
        return None
    texts, tags = w.texts, w.tags
    title_node = tree.css_first("title")
    title = title_node.text() if title_node is not None else ""
    link = w.link.astype(np.float32)
    n_chars, cps = _code_points(texts)
    ts, raw, eq = _text_stats(texts, link, np.array([t == "pre" for t in tags], dtype=bool), n_chars, cps)
    chars = np.exp(ts[:, 0]) - 1  # Latin-equivalent characters (``_text_stats``)
    dense = float(eq.sum()) / max(float(raw.sum()), 1.0)
    groups = _ancestors(w.el_parent, w.el, np.array(GROUP_LEVELS, dtype=np.int64))  # [n, len(GROUP_LEVELS)]
    el_log_chars, el_link_density = _element_columns(w, dense)
    total = float(chars.sum())
    # repetition of the same text on the page
    rep = _repeats(cps, n_chars)
    link_total = float(link.sum()) / max(float(raw.sum()) if dense != 1.0 else total, 1.0)
    page = _page_row(w.anc, w.own, chars, rep, link_total, og)
    feats = np.empty((n, n_features()), dtype=np.float32)
    _fill(feats, ts, w.own, len(OWN_TAGS), w.anc, len(ANCESTOR_TAGS), w.near, w.any, len(CLASS_WORDS), groups,
          el_log_chars, el_link_density, w.depth, chars, np.float32(max(total, 1.0)), np.log(rep), rep, page,
          _title_overlap(texts, title, n_chars, cps))
    return Blocks(texts, feats, tags, groups, w.el, w.el_parent)


def _element_columns(w, dense: float) -> tuple[np.ndarray, np.ndarray]:
    """Per element: log characters of its blocks, and their share inside links (``GROUP_LEVELS`` columns of
    the features). ``dense``: Latin-equivalent over raw characters of the page's blocks (elements'
    characters are scaled by it: per script counts are not kept per element)."""
    raw_chars = w.el_chars.astype(np.float32)
    el_chars = raw_chars * np.float32(dense) if dense != 1.0 else raw_chars
    return np.log1p(el_chars), w.el_link.astype(np.float32) / np.maximum(raw_chars, 1)


@nb.njit(cache=True, inline="always")
def _unbroken(cp):
    """A line break read as a space (``_repeats``, ``blocks.assemble``: the same text, another layout)."""
    return SPACE if cp == NEWLINE else cp


@nb.njit(cache=True)
def _repeats(cps, n_chars):
    """Per block: how many blocks of the page have the same text (itself included), float32. The blocks'
    code points ("\\x00"-joined, ``n_chars`` each) go into an open-addressing table by a polynomial hash;
    blocks of the same hash and length are compared code point by code point. A line break (a ``br``) counts
    as the space it stands for: the same text laid out with ``<br>`` in one copy is the same text."""
    n = n_chars.size
    starts = np.empty(n, dtype=np.int64)
    hashes = np.empty(n, dtype=np.uint64)
    pos = 0
    base = np.uint64(_HASH_BASE)
    for b in range(n):
        starts[b] = pos
        h = np.uint64(n_chars[b])
        for i in range(pos, pos + n_chars[b]):
            h = h * base + np.uint64(_unbroken(cps[i]))
        hashes[b] = h
        pos += n_chars[b] + 1
    size = 16
    while size < 2 * n:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    for b in range(n):
        h = hashes[b]
        s = np.int64(h ^ (h >> np.uint64(31))) & (size - 1)
        while True:
            r = table[s]
            if r < 0:
                table[s] = b
                first[b] = b
                break
            if hashes[r] == h and n_chars[r] == n_chars[b]:
                same = True
                for k in range(n_chars[b]):
                    if _unbroken(cps[starts[r] + k]) != _unbroken(cps[starts[b] + k]):
                        same = False
                        break
                if same:
                    first[b] = r
                    break
            s = (s + 1) & (size - 1)
        counts[first[b]] += 1
    out = np.empty(n, dtype=np.float32)
    for b in range(n):
        out[b] = counts[first[b]]
    return out


@nb.njit(cache=True)
def _fill(out, ts, own, n_own, anc, n_anc, near, any_, n_words, groups, el_log_chars, el_link_density, depth, chars,
          total, log_rep, rep, page, title):
    """The feature matrix ``out`` [n, ``n_features()``] of a page's blocks, in ``feature_names`` order: the text
    statistics ``ts``; the owner's tag one-hot; the ancestor tag bits and the class-word bits (near, any) as
    0/1 columns; log characters and link density of the elements ``GROUP_LEVELS`` up (``groups``); position
    (block, characters before it over ``total``, depth over 30 and over the page's deepest); repeats; the
    two blocks before and after (log chars, link density, log sentence marks, zeros past the ends); the
    page's row; log characters against the page's largest block; title overlap. The table sizes (tags,
    ancestor tags, class words) come as arguments: numba's cache would keep constants of another file."""
    n = out.shape[0]
    deepest = np.float32(1.0)
    largest = ts[0, 0]
    for i in range(n):
        deepest = max(deepest, np.float32(depth[i]))
        largest = max(largest, ts[i, 0])
    last = np.float32(max(n - 1, 1))
    before = np.float32(0.0)
    out[:] = 0.0  # the one-hot and bit columns: mostly 0, their 1s set below
    for i in range(n):
        row = out[i]
        c = 0
        for j in range(ts.shape[1]):
            row[c + j] = ts[i, j]
        c += ts.shape[1]
        row[c + own[i]] = 1.0
        c += n_own
        a = anc[i]
        j = 0
        while a != 0 and j < n_anc:
            if a & 1:
                row[c + j] = 1.0
            a >>= 1
            j += 1
        c += n_anc
        for bits in (near, any_):
            for k in range(bits.shape[1]):
                word = bits[i, k]
                j = 64 * k
                while word != 0 and j < n_words:
                    if word & np.uint64(1):
                        row[c + j] = 1.0
                    word >>= np.uint64(1)
                    j += 1
            c += n_words
        for k in range(groups.shape[1]):
            g = groups[i, k]
            row[c] = el_log_chars[g]
            row[c + 1] = el_link_density[g]
            c += 2
        row[c] = np.float32(i) / last
        row[c + 1] = before / total
        before += chars[i]
        row[c + 2] = np.float32(depth[i]) / np.float32(30.0)
        row[c + 3] = np.float32(depth[i]) / deepest
        row[c + 4] = log_rep[i]
        row[c + 5] = np.float32(1.0) if rep[i] > 1 else np.float32(0.0)
        c += 6
        for s in (-2, -1, 1, 2):
            src = i + s
            if 0 <= src < n:
                row[c] = ts[src, 0]
                row[c + 1] = ts[src, 3]
                row[c + 2] = ts[src, 4]
            else:
                row[c] = 0.0
                row[c + 1] = 0.0
                row[c + 2] = 0.0
            c += 3
        for j in range(page.size):
            row[c + j] = page[j]
        c += page.size
        row[c] = ts[i, 0] - largest
        row[c + 1] = title[i, 0]
        row[c + 2] = title[i, 1]


def _page_row(anc, own, chars, rep, link_total: float, og: str) -> np.ndarray:
    """The page's features (``PAGE_NAMES``, then the Open Graph types), one row."""
    total = float(chars.sum())
    in_li = (anc & ANC_BIT["li"]) != 0
    in_tab = (anc & ANC_BIT["table"]) != 0
    headings = np.count_nonzero((own == OWN_INDEX["h1"]) | (own == OWN_INDEX["h2"]))
    return np.array([np.log1p(total), link_total, np.log1p(len(chars)),
                     float(chars[in_li].sum()) / max(total, 1.0), float(chars[in_tab].sum()) / max(total, 1.0),
                     headings / 10.0, np.count_nonzero(rep > 1) / len(rep)]
                    + [float(og.endswith(t)) for t in _OG_TYPES], dtype=np.float32)


TEXT_NAMES = ["log_chars", "log_words", "log_tokens", "link_density", "log_sentence_marks", "sentence_marks_per_word",
              "log_commas", "log_separators", "digit_share", "starts_upper", "ends_sentence", "ends_colon",
              "chars_per_word", "tokens_per_word"]
PAGE_NAMES = ["page_log_chars", "page_link_density", "page_log_blocks", "page_list_share", "page_table_share",
              "page_headings", "page_repeated_share"]


def feature_names() -> list[str]:
    """Names of the feature columns, in order (the model file stores their fingerprint)."""
    names = list(TEXT_NAMES)
    names += ["own_" + t for t in OWN_TAGS]
    names += ["in_" + t for t in ANCESTOR_TAGS]
    names += ["near_cls_" + w for w in CLASS_WORDS]
    names += ["any_cls_" + w for w in CLASS_WORDS]
    for k in GROUP_LEVELS:
        names += [f"up{k}_log_chars", f"up{k}_link_density"]
    names += ["pos_block", "pos_chars", "depth", "depth_rel", "log_repeats", "repeated"]
    for s in (-2, -1, 1, 2):
        names += [f"n{s}_log_chars", f"n{s}_link_density", f"n{s}_log_sentence_marks"]
    names += PAGE_NAMES + ["og_" + t for t in _OG_TYPES] + ["rel_log_chars", "title_share_of_block",
                                                             "block_share_of_title"]
    return names


@functools.lru_cache(maxsize=None)
def _columns(*names: str) -> list[int]:
    """The feature matrix's column numbers of ``names``."""
    all_names = feature_names()
    return [all_names.index(c) for c in names]


def link_columns(feats: np.ndarray) -> np.ndarray:
    """The block's and its parent element's share of characters inside links, ``[n, 2]`` (columns of a
    feature matrix)."""
    return feats[:, _columns("link_density", "up1_link_density")]


def chrome_blocks(feats: np.ndarray) -> np.ndarray:
    """Per block, whether it lies inside a ``nav``, ``footer`` or ``aside`` element (the ``in_nav``,
    ``in_footer`` and ``in_aside`` feature columns), or inside a ``header`` that is not inside an ``article`` or
    ``main`` (the page's banner: a site's name, menu and sign-in links, where a header inside the article holds
    its title and byline), ``[n]`` bool. The banner rule changed no page of WCXB's, Readability's or the third
    set's (their classifier already scored those blocks below the threshold) and drops a site bar the
    classifier kept on a small page (a code host's "Product Pricing Sign in")."""
    inside = feats[:, _columns("in_nav", "in_footer", "in_aside", "in_header", "in_article", "in_main")] > 0
    banner = inside[:, 3] & ~inside[:, 4] & ~inside[:, 5]
    return inside[:, :3].any(axis=1) | banner


def place_columns(feats: np.ndarray) -> np.ndarray:
    """Per block, whether it lies inside a ``noscript`` element, inside an ``article`` element and inside a
    ``form`` (the ``in_noscript``, ``in_article`` and ``in_form`` feature columns), ``[n, 3]`` bool: read by
    ``blocks.noscript_text``, ``region.after_article`` and ``blocks.page_forms``."""
    return feats[:, _columns("in_noscript", "in_article", "in_form")] > 0


@functools.lru_cache(maxsize=None)
def n_features() -> int:
    return len(feature_names())
