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
The per-block arithmetic here is numpy over the finished block table, with compiled scans (numba) for the
text statistics and title overlap over the code points of all blocks at once and for the container
ancestors. ``benchmarks/extract_features_check.py`` checks that a change leaves the features of WCXB's
development pages as they were (the shipped model reads them).
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

import numba as nb
import numpy as np

from curate.extract.ascii import COLON, NUL, SPACE
from curate.extract.chars import (CLASS_TABLE, IS_COMMA, IS_DIGIT, IS_SENTENCE, IS_SEPARATOR, IS_UPPER, IS_WORD,
                                  UNKNOWN, classes)
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


def _bits(words: np.ndarray, n_bits: int) -> np.ndarray:
    """Bit sets given as 64-bit words (``[n, k]``, word 0 holding bits 0-63) as 0/1 columns ``[n, n_bits]``."""
    w = np.ascontiguousarray(words).astype("<u8", copy=False)
    bits = np.unpackbits(w.view(np.uint8).reshape(len(w), -1), axis=1, bitorder="little")
    return bits[:, :n_bits].astype(np.float32)


def _title_overlap(texts: list[str], title: str) -> np.ndarray:
    """Per block: share of its words in the page title, share of the title's words in it (blocks of up to
    300 characters; words: lower-cased ``\\w+``, each counted once). All short blocks are lower-cased in one
    pass and their words counted by one compiled scan (``_title_counts``): each word is a run of word
    characters (``classes``, the same ``\\w`` as ``re``) and is told apart by a 64-bit polynomial hash of its
    code points (``_word_hash``; two different words of one block sharing a hash: odds about 1e-17)."""
    tw = set(_WORD_RE.findall(title.lower()))
    out = np.zeros((len(texts), 2), dtype=np.float32)
    if not tw:
        return out
    short = [i for i, n in enumerate(map(len, texts)) if n <= 300]
    if not short:
        return out
    # "\x00" ends a block: neither a word character nor cased, so lower() and \w+ act per block as before
    joined = "\x00".join([texts[i] for i in short]).lower()
    if joined.count("\x00") != len(short) - 1:  # a block holding NUL itself: one block at a time
        for i in short:
            bw = set(_WORD_RE.findall(texts[i].lower()))
            if bw:
                common = len(bw & tw)
                out[i, 0] = common / len(bw)
                out[i, 1] = common / len(tw)
        return out
    cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    title_key = np.sort(np.array([_word_hash(w) for w in tw], dtype=np.uint64))
    ok, n_words, common = _title_counts(cps, CLASS_TABLE, title_key, len(short))
    if not ok:  # code points not seen before: fill their classes, then count
        classes(cps)
        ok, n_words, common = _title_counts(cps, CLASS_TABLE, title_key, len(short))
    has = np.flatnonzero(n_words)
    rows = np.asarray(short, dtype=np.int64)[has]
    common = common.astype(np.float64)
    out[rows, 0] = common[has] / n_words[has]
    out[rows, 1] = common[has] / len(tw)
    return out


_HASH_BASE = 0x100000001B3


def _word_hash(word: str) -> int:
    """``sum cp[k] * B**k`` modulo 2**64 over the code points of ``word`` (what ``_title_counts`` computes)."""
    return sum(ord(ch) * pow(_HASH_BASE, k, 2**64) for k, ch in enumerate(word)) % 2**64


@nb.njit(cache=True)
def _title_counts(cps, table, title_key, n_blocks):
    """One pass over the code points of the "\\x00"-joined blocks: per block, how many distinct words (runs of
    ``\\w``, told apart by ``_word_hash``) and how many of them are in ``title_key`` (sorted). ok = False when a
    code point's class is not in ``table`` yet (255)."""
    n_words = np.zeros(n_blocks, dtype=np.int64)
    common = np.zeros(n_blocks, dtype=np.int64)
    keys = np.empty(cps.size // 2 + 1, dtype=np.uint64)
    base = np.uint64(_HASH_BASE)
    m = 0  # words of the current block so far
    block = 0
    h = np.uint64(0)
    p = np.uint64(1)
    in_word = False
    for i in range(cps.size + 1):
        if i < cps.size:
            cp = cps[i]
            k = table[cp]
            if k == UNKNOWN:
                return False, n_words, common
        else:  # past the end: the last block ends
            cp = np.uint32(0)
            k = np.uint8(0)
        if k & IS_WORD:
            if not in_word:
                in_word = True
                h = np.uint64(0)
                p = np.uint64(1)
            h += np.uint64(cp) * p
            p *= base
            continue
        if in_word:
            keys[m] = h
            m += 1
            in_word = False
        if cp == NUL:  # the end of a block (or of the last one)
            if m:
                ks = keys[:m]
                for j in range(1, m):  # insertion sort: a short block has few words
                    v = ks[j]
                    t = j - 1
                    while t >= 0 and ks[t] > v:
                        ks[t + 1] = ks[t]
                        t -= 1
                    ks[t + 1] = v
                distinct = 0
                hit = 0
                for j in range(m):
                    if j == 0 or ks[j] != ks[j - 1]:
                        distinct += 1
                        t = np.searchsorted(title_key, ks[j])
                        if t < title_key.size and title_key[t] == ks[j]:
                            hit += 1
                n_words[block] = distinct
                common[block] = hit
            m = 0
            block += 1
    return True, n_words, common


# Scripts written without spaces between words. Their characters are counted as the Latin characters and
# words they stand for, so a paragraph of Chinese or Thai has about the lengths, word counts and
# punctuation per word of the same paragraph in English (the model was trained on pages with spaces):
# a Han / kana character is about 1.7 characters of a word (mean Chinese word length in corpora is 1.6-1.8),
# a Thai, Lao, Khmer or Myanmar letter about a quarter of a word (vowel signs and tone marks not counted);
# an English word with its space is about six characters. Only word characters (``\w``) count.
LATIN_WORD_CHARS = 6.0
CJK_WORD_CHARS = 1.7
SEA_WORD_CHARS = 4.0


def _text_stats(texts: list[str], link: np.ndarray, pre: np.ndarray):
    """Per-block text features, counted by one compiled scan over the page's code points (``_text_counts``).
    ``pre``: blocks whose white space was kept (``<pre>``); the others hold single spaces between words.
    Returns (features [n, N_TEXT], raw characters per block, Latin-equivalent characters per block): lengths, words and tokens count a character
    of a script without spaces (``_dense_script``) as the Latin text it stands for; shares of characters
    (links, digits) are of the raw characters."""
    n = len(texts)
    chars = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    cps = np.frombuffer("\x00".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    ok, counts, ends = _text_counts(cps, CLASS_TABLE, chars)
    if not ok:  # code points not seen before: fill their classes, then count
        classes(cps)
        ok, counts, ends = _text_counts(cps, CLASS_TABLE, chars)
    wtok, digits, sent, seps, comma, spaces, cjk, sea = counts.astype(np.float32).T
    # words (str.split): single spaces between them, except in <pre> blocks
    words = spaces + 1
    for i in np.flatnonzero(pre):
        words[i] = len(texts[i].split())
    dense_words = cjk / CJK_WORD_CHARS + sea / SEA_WORD_CHARS
    words = words + dense_words
    wtok = wtok + dense_words
    upper0, endp, colon = ends.astype(np.float32).T
    raw = chars.astype(np.float32)
    chars = raw + dense_words * LATIN_WORD_CHARS - cjk - sea
    lchars = np.log1p(chars)
    ts = np.stack([lchars, np.log1p(words), np.log1p(wtok), link / np.maximum(raw, 1), np.log1p(sent),
                   sent / np.maximum(words, 1), np.log1p(comma), np.log1p(seps), digits / np.maximum(raw, 1),
                   upper0, endp, colon, chars / np.maximum(words, 1) / 10.0, wtok / np.maximum(words, 1)], axis=1)
    return ts, raw, chars


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
            if cp == SPACE:
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
        head = data[:80000]
        html = head.decode("utf-8", "ignore") if b"og:type" in head.lower() else ""
    m = _OG_TYPE_RE.search(html, 0, 20000)
    return m.group(1).lower() if m else ""


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
    ts, raw, eq = _text_stats(texts, link, np.array([t == "pre" for t in tags], dtype=bool))  # [n, N_TEXT]
    own_1h = np.zeros((n, len(OWN_TAGS)), dtype=np.float32)
    own_1h[np.arange(n), w.own] = 1.0
    anc_b = _bits(w.anc[:, None], len(ANCESTOR_TAGS))
    near_b = _bits(w.near, len(CLASS_WORDS))
    any_b = _bits(w.any, len(CLASS_WORDS))
    chars = np.exp(ts[:, 0]) - 1  # Latin-equivalent characters (``_text_stats``)
    dense = float(eq.sum()) / max(float(raw.sum()), 1.0)
    groups, cont = _containers(w, dense)
    depth = w.depth.astype(np.float32)
    total = float(chars.sum())
    cum = (np.cumsum(chars) - chars) / max(total, 1.0)
    pos = np.stack([np.arange(n, dtype=np.float32) / max(n - 1, 1), cum, depth / 30.0,
                    depth / max(float(depth.max()), 1.0)], axis=1)
    # repetition of the same text on the page
    counts = Counter(texts)
    rep = np.fromiter(map(counts.__getitem__, texts), dtype=np.float32, count=n)
    rep = np.stack([np.log(rep), (rep > 1).astype(np.float32)], axis=1)
    link_total = float(link.sum()) / max(float(raw.sum()) if dense != 1.0 else total, 1.0)
    page = _page_row(w.anc, chars, own_1h, rep, link_total, og)
    # the block's size relative to the page's largest block
    rel = (ts[:, 0] - ts[:, 0].max())[:, None]
    feats = np.concatenate([ts, own_1h, anc_b, near_b, any_b, cont, pos, rep, _neighbours(ts),
                            np.broadcast_to(page, (n, page.size)), rel, _title_overlap(texts, title)], axis=1)
    return Blocks(texts, feats.astype(np.float32), tags, groups, w.el, w.el_parent)


def _containers(w, dense: float) -> tuple[np.ndarray, np.ndarray]:
    """(the element ``GROUP_LEVELS`` levels above each block's owner [n, 4]; their log characters and link
    density [n, 8]). ``dense``: Latin-equivalent over raw characters of the page's blocks (containers'
    characters are scaled by it: per script counts are not kept per element)."""
    el_chars = w.el_chars.astype(np.float32)
    raw_chars = el_chars
    if dense != 1.0:
        el_chars = el_chars * np.float32(dense)
    el_link = w.el_link.astype(np.float32)
    groups = _ancestors(w.el_parent, w.el, np.array(GROUP_LEVELS, dtype=np.int64))  # [n, len(GROUP_LEVELS)]
    cont = np.empty((len(groups), 2 * len(GROUP_LEVELS)), dtype=np.float32)
    cont[:, 0::2] = np.log1p(el_chars[groups])
    cont[:, 1::2] = el_link[groups] / np.maximum(raw_chars[groups], 1)
    return groups, cont


def _neighbours(ts: np.ndarray) -> np.ndarray:
    """The two blocks before and after each block: log characters, link density, log sentence marks
    (zeros past the page's ends)."""
    core = ts[:, [0, 3, 4]]
    neigh = []
    for s in (-2, -1, 1, 2):
        sh = np.zeros_like(core)
        if s < 0:
            sh[-s:] = core[:s]
        else:
            sh[:-s] = core[s:]
        neigh.append(sh)
    return np.concatenate(neigh, axis=1)


def _page_row(anc, chars, own_1h, rep, link_total: float, og: str) -> np.ndarray:
    """The page's features (``PAGE_NAMES``, then the Open Graph types), one row."""
    total = float(chars.sum())
    in_li = (anc & ANC_BIT["li"]) != 0
    in_tab = (anc & ANC_BIT["table"]) != 0
    return np.array([np.log1p(total), link_total, np.log1p(len(chars)),
                     float(chars[in_li].sum()) / max(total, 1.0), float(chars[in_tab].sum()) / max(total, 1.0),
                     float((own_1h[:, OWN_INDEX["h1"]] + own_1h[:, OWN_INDEX["h2"]]).sum()) / 10.0,
                     float(rep[:, 1].mean())] + [float(og.endswith(t)) for t in _OG_TYPES], dtype=np.float32)


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
    ``in_footer`` and ``in_aside`` feature columns), ``[n]`` bool."""
    return (feats[:, _columns("in_nav", "in_footer", "in_aside")] > 0).any(axis=1)


def n_features() -> int:
    return len(feature_names())
