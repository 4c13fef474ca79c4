"""Word splitting for the heuristic filters: DataTrove's spaCy tokens, fast, or one regex.

``words = "spacy"`` (the default) makes the tokens DataTrove's ``split_into_words`` makes: spaCy's
rule-based tokenizer of a blank pipeline for ``language`` (``spacy.blank(language)``: no model, no
download), whitespace-only tokens removed. spaCy's tokenizer costs about 30 microseconds per
whitespace-separated chunk; natural text repeats its chunks, so each chunk (``text.split()``) is
tokenized once per process and remembered (a bounded memo, ``MEMO_SIZE`` chunks). A chunk is
tokenized on its own, so the result never depends on which documents came before (spaCy's own
output differs from that for about one chunk in a million, where its special-case matcher looks
at the neighbouring chunk). Chunks whose tokens are known without spaCy skip it: a word of letters,
a word with simple marks around it (``plain_tokens``, the ``SHORTCUT_LANGUAGES``) and, for English,
hyphenated words, possessives, numbers and words in quotes or brackets (``compound_tokens``), each
checked against spaCy by ``tests/test_words.py``. The last ``RECENT_TEXTS`` texts are remembered
in one cache (``Recent``: chunks, langid's word ids, chunk ids here, tokens): texts that ``langid``
split come with its word ids (``remember_split``), so a batch looks up only its distinct words
here, and the heuristic stages after it share each text's chunk ids and tokens.

``words = "regex"`` is Quarry's own splitter (no spaCy; about 10x faster on text never seen
before): words (letters and digits, keeping inner ``-`` and ``.``), numbers with separators
(``1,000``), apostrophe tails (``'s``) and single punctuation marks (``...`` and ``--`` whole).

Sentences (C4's count) follow DataTrove's spaCy ``sentencizer`` over the same tokens, or, with
``words = "regex"``, a regex splitter (end marks ``. ! ?`` before a space, not after common
abbreviations or initials).
"""
from __future__ import annotations

import gc
import re
import unicodedata
from contextlib import contextmanager
from functools import lru_cache
from itertools import chain, filterfalse, islice, repeat

import numba as nb
import numpy as np

from curate.stages.punctuation import PUNCTUATION

WORD_SPLITTERS = ("spacy", "regex")
MEMO_SIZE = 500_000  # chunks remembered per language; the memo is emptied when full
RECENT_TEXTS = 2048  # whole texts whose tokens are remembered (about one shard)
# languages where the shortcut for plain words (see SpacyWords._shortcuts) is checked against spaCy
SHORTCUT_LANGUAGES = frozenset({"en", "de", "es", "it", "pl", "ru", "cs", "fr", "nl", "pt"})
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

# --- regex splitter --------------------------------------------------------------------------

_NUMBER = r"\d+(?:[.,:/]\d+)+"          # 1,000  3.14  1:26  12/05
_WORD = r"\w+(?:[-.]\w+)*"               # twenty-one  U.S  e.g
_CLITIC = r"['\u2019]\w+"                 # 's  n't-like tails  'tis
_PUNCT = r"\.\.\.|--+|[^\w\s]"            # ...  --  any other symbol alone
_TOKEN_RE = re.compile(f"{_NUMBER}|{_WORD}|{_CLITIC}|{_PUNCT}")


def regex_tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof rev hon gen col capt lt sgt mt ft vs etc e.g i.e cf viz al a.m p.m "
    "vol vols fig figs ch pp inc ltd co corp dept est approx jan feb mar apr jun jul aug "
    "sep sept oct nov dec".split()
)
_SENTENCE_END_RE = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s|$)")


def regex_sentences(text: str) -> list[str]:
    """Sentences of ``text``: cut after ``. ! ? …`` (and closing quotes/brackets) before a space,
    except after a common abbreviation (``Mr.``, ``e.g.``) or a single-letter initial."""
    out, start = [], 0
    for m in _SENTENCE_END_RE.finditer(text):
        if text[m.start()] == ".":
            before = text[start:m.start()].rsplit(None, 1)
            last = before[-1].lower().lstrip("(\"'\u201c\u2018") if before else ""
            if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                continue
        piece = text[start:m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


# --- recent texts, shared between stages --------------------------------------------------------


class Recent:
    """What is remembered of one recent text: ``chunks`` (``text.split()``; not to be modified),
    ``word_ids`` (langid's, see ``remember_split``, or None) and, for the ``SpacyWords`` that is
    its ``owner``, the chunks' ids there (None: not prefetched) and the text's tokens (None: not
    made yet)."""

    __slots__ = ("chunks", "word_ids", "owner", "ids", "tokens")

    def __init__(self, chunks: list[str], word_ids: tuple | None = None):
        self.chunks, self.word_ids = chunks, word_ids
        self.owner = self.ids = self.tokens = None


_RECENT: dict[str, Recent] = {}  # text -> Recent, for the last RECENT_TEXTS texts


def remember_split(text: str, chunks: list[str], ids: tuple | None = None) -> None:
    """Note that ``chunks`` is ``text.split()`` (``langid`` splits every text; the heuristic stages
    after it then use the same lists, whose strings' hashes are known). Not to be modified.
    ``ids``: (``index``, ids) where ``index`` is a dict word -> id whose ids are its insertion
    order and only grow (langid's fastText word index) and ``ids`` its id of each chunk, so that
    ``SpacyWords.prefetch`` looks up only the distinct ids, not every chunk again."""
    if len(_RECENT) >= RECENT_TEXTS:
        _RECENT.clear()
    _RECENT[text] = Recent(chunks, ids)


# --- spaCy splitter ----------------------------------------------------------------------------


@contextmanager
def _gc_paused():
    """No cyclic garbage collection inside. Learning a batch makes tens of thousands of tuples and
    lists (of strings and integers only: no reference cycles), which would otherwise start many
    collections, some of them over the whole heap of the process."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()



class SpacyWords:
    """spaCy's tokens of a text, chunk by chunk, remembered."""

    def __init__(self, language: str):
        try:
            import spacy
        except ImportError as e:  # a config error, raised when the stage is built
            raise ValueError(
                "words = 'spacy' (DataTrove's word splitting) needs the spacy package: "
                "pip install spacy (no model is downloaded), or set words = 'regex'") from e
        try:
            self._nlp = spacy.blank(language)
        except Exception as e:
            raise ValueError(f"language = {language!r}: spaCy has no tokenizer for it ({e})") from e
        # Tokenizing reads no lexical attribute (spaCy's Tokenizer uses a lexeme's orth and length
        # only), so this private pipeline's vocab computes none: a new token string costs a string
        # store entry instead of ~20 attribute getters (shape, like_num, ...).
        self._nlp.vocab.lex_attr_getters = {}
        self._tokenizer = self._nlp.tokenizer
        from spacy.attrs import IDX, LENGTH
        self._idx_length = [IDX, LENGTH]
        self._rules = frozenset(self._tokenizer.rules or ())  # spaCy's special cases ("cannot", "e.g.")
        self._rule_cores = rule_cores(self._rules)
        self._shortcut = language in SHORTCUT_LANGUAGES
        self._compound = self._shortcut and language in COMPOUND_LANGUAGES
        self._memo: dict[str, tuple[str, ...]] = {}
        self._sentence_memo: dict[str, int] = {}  # chunk -> its packed sentence effect
        self._stats_memo: dict[str, int] = {}  # chunk -> its token_stats, packed
        self._clear_ids()

    def reset(self) -> None:
        """Forget every remembered chunk and text (the pipeline stays loaded)."""
        for memo in (self._memo, self._sentence_memo, self._stats_memo, _RECENT):
            memo.clear()
        self._clear_ids()

    # Chunk ids: a prefetched text's chunks are looked up once, giving an int id each; its counts
    # (token_stats) and sentence codes are then numpy gathers from per-id arrays, not one dict
    # lookup per chunk and stage.

    def _clear_ids(self) -> None:
        self._ids: dict[str, int] = {}  # chunk -> id
        self._id_chunks: list[str] = []  # id -> chunk
        self._id_tokens: list[tuple[str, ...]] = []  # id -> its tokens
        self._id_stats = np.zeros((1024, 5), dtype=np.int64)  # id -> token_stats
        self._id_codes = np.full(1024, -1, dtype=np.int64)  # id -> packed sentence effect, -1: not known yet
        self._id_ntok = np.zeros(1024, dtype=np.int64)  # id -> how many tokens
        self._id_toff = np.zeros(1024, dtype=np.int64)  # id -> where its token lengths start in _tok_lens
        self._tok_lens = np.zeros(4096, dtype=np.int64)
        self._n_tok_lens = 0
        for entry in _RECENT.values():  # recent texts' ids here are void
            if entry.owner is self:
                entry.owner = entry.ids = entry.tokens = None
        self._generation = getattr(self, "_generation", 0) + 1  # ids given before this are void
        self._lid_index = None  # the word index (see remember_split) whose ids _lid_map translates
        self._lid_map = np.zeros(0, dtype=np.int64)  # its id -> chunk id, -1: not known yet
        self._lid_words: list[str] = []  # its id -> word

    def _add_ids(self, new: list[str]) -> None:
        """Give ids to chunks without one (their tokens and stats are learned here if need be)."""
        toks = self.chunk_tokens(new)  # learned here where the memo was emptied while learning
        try:
            packed = list(map(self._stats_memo.__getitem__, new))
        except KeyError:
            packed = list(map(_packed_stats, toks))
        base, n = len(self._id_chunks), len(new)
        if base + n > len(self._id_codes):
            size = max(2 * len(self._id_codes), base + n)
            grown = np.zeros((size, 5), dtype=np.int64)
            grown[:base] = self._id_stats[:base]
            self._id_stats = grown
            self._id_codes = np.concatenate([self._id_codes[:base], np.full(size - base, -1, dtype=np.int64)])
            self._id_ntok = np.concatenate([self._id_ntok[:base], np.zeros(size - base, dtype=np.int64)])
            self._id_toff = np.concatenate([self._id_toff[:base], np.zeros(size - base, dtype=np.int64)])
        self._ids.update(zip(new, range(base, base + n)))
        self._id_chunks.extend(new)
        self._id_tokens.extend(toks)
        # packed stats (five 48-bit fields) -> rows of five int64: 6 little-endian bytes a field
        raw = b"".join(map(int.to_bytes, packed, repeat(5 * STATS_BITS // 8), repeat("little")))
        wide = np.zeros((n, 5, 8), dtype=np.uint8)
        wide[:, :, :STATS_BITS // 8] = np.frombuffer(raw, dtype=np.uint8).reshape(n, 5, STATS_BITS // 8)
        self._id_stats[base:base + n] = wide.view("<i8").reshape(n, 5)
        self._id_codes[base:base + n] = -1
        ntok = np.fromiter(map(len, toks), dtype=np.int64, count=n)
        lens = np.fromiter(map(len, chain.from_iterable(toks)), dtype=np.int64)
        at = self._n_tok_lens
        if at + len(lens) > len(self._tok_lens):
            grown = np.zeros(max(2 * len(self._tok_lens), at + len(lens)), dtype=np.int64)
            grown[:at] = self._tok_lens[:at]
            self._tok_lens = grown
        self._tok_lens[at:at + len(lens)] = lens
        self._id_ntok[base:base + n] = ntok
        self._id_toff[base:base + n] = at + np.cumsum(ntok) - ntok
        self._n_tok_lens = at + len(lens)

    def _fill_codes(self, need: np.ndarray) -> None:
        """Learn the sentence codes of the chunks with ids ``need`` (distinct)."""
        chunks = list(map(self._id_chunks.__getitem__, need.tolist()))
        self._learn_sentences(set(chunks))
        self._id_codes[need] = np.fromiter(map(self._sentence_memo.__getitem__, chunks), dtype=np.int64,
                                           count=len(chunks))

    def _learn(self, chunks) -> None:
        """Tokenize the chunks not seen yet, all in one call: joined with newlines, each chunk is
        tokenized as it would be alone (a newline token sits between two chunks). Their packed
        ``token_stats`` are remembered with them."""
        memo, stats = self._memo, self._stats_memo
        missing = set(chunks).difference(memo)  # each chunk's tokens do not depend on the order
        if not missing:
            return
        if len(memo) + len(missing) > MEMO_SIZE:
            memo.clear()
            stats.clear()
        if self._shortcut:
            missing = self._shortcuts(missing)
            if not missing:
                return
        missing = list(missing)
        joined = "\n".join(missing)
        if _SURROGATE_RE.search(joined):  # spaCy cannot encode a lone surrogate: U+FFFD in its place
            joined = _SURROGATE_RE.sub("\ufffd", joined)
        with self._nlp.memory_zone():
            # token offsets and lengths straight from the Doc's C array: no Python Token objects
            spans = self._tokenizer(joined).to_array(self._idx_length)
        starts = spans[:, 0].tolist()
        ends = (spans[:, 0] + spans[:, 1]).tolist()
        # the tokens between two newline tokens are one chunk's (chunks hold no whitespace, so the
        # only whitespace tokens are the newlines joining them)
        tokens = [joined[a:b] for a, b in zip(starts, ends)]
        first = 0
        for chunk, stop in zip(missing, [i for i, t in enumerate(tokens) if t == "\n"] + [len(tokens)]):
            memo[chunk] = toks = tuple(tokens[first:stop])
            stats[chunk] = _packed_stats(toks)
            first = stop + 1

    def _shortcuts(self, chunks) -> list[str]:
        """Tokenize the chunks whose spaCy tokens are known without running spaCy; return the others.
        See ``plain_tokens``; ``tests/test_words.py`` checks them against spaCy for every language
        in ``SHORTCUT_LANGUAGES``."""
        memo, stats, rules = self._memo, self._stats_memo, self._rules
        alpha = set(filter(str.isalpha, chunks))  # a word of letters is one token (unless a rule)
        alpha.difference_update(rules)
        memo.update(zip(alpha, zip(alpha)))
        stats.update(zip(alpha, map(_ALPHA_STATS.__getitem__, map(len, alpha))))
        rest = []
        cores = self._rule_cores
        others = set(chunks).difference(alpha)
        # the commonest case in bulk: a word of letters then one mark (".": after a lower-case ASCII
        # letter), the word none of the rule cores (plain_tokens' tokens, without its regex)
        marked = {c for c in others if c[-1] in _MARKS and c[:-1].isalpha()
                  and (c[-1] != "." or c[-2] in _ASCII_LOWER)}
        marked = {c for c in marked if c[:-1] not in cores}
        memo.update((c, (c[:-1], c[-1])) for c in marked)
        stats.update((c, _ONE_WORD + 1 + (len(c) - 1) * _WORD_CHAR) for c in marked)
        for c in others.difference(marked):
            toks = plain_tokens(c, rules, cores)
            if toks is None:
                rest.append(c)
            else:  # one word of letters, the rest punctuation marks of one character
                memo[c] = toks
                stats[c] = _ONE_WORD + (len(toks) - 1) + (len(c) - len(toks) + 1) * _WORD_CHAR
        if self._compound:  # hyphenated words, possessives, curly quotes (see compound_tokens)
            others, full = rest, self._tokenizer.rules or {}
            rest = []
            for c in others:
                toks = compound_tokens(c, full)
                if toks is None:
                    rest.append(c)
                else:
                    memo[c] = toks
                    stats[c] = _packed_stats(toks)
        return rest

    def prefetch(self, texts: list[str]) -> None:
        """Learn the chunks of many texts at once: one spaCy call (and one ``memory_zone``, whose
        exit costs about half a millisecond) for a batch instead of one per text. The texts'
        chunk ids are remembered as recent texts (``Recent``)."""
        with _gc_paused():
            self._prefetch(texts)

    def _prefetch(self, texts: list[str]) -> None:
        todo = [(t, _RECENT.get(t) or Recent(t.split())) for t in dict.fromkeys(texts[:RECENT_TEXTS])]
        todo = [(t, e) for t, e in todo if e.owner is not self]  # not those prefetched or split here
        texts, entries = [t for t, _ in todo], [e for _, e in todo]
        split = [e.chunks for e in entries]
        # texts whose chunks have ids in one word index (langid's): translated by an array
        index = next((e.word_ids[0] for e in entries if e.word_ids is not None), None)
        by_index = [e.word_ids is not None and e.word_ids[0] is index for e in entries]
        other = [c for c, b in zip(split, by_index) if not b]
        missing = set(chain.from_iterable(other)).difference(self._ids)
        if len(missing) >= MEMO_SIZE // 2:
            return
        if len(self._ids) + len(missing) > MEMO_SIZE:
            self._clear_ids()
            missing = set(chain.from_iterable(other))
        if missing:
            self._learn(missing)
            self._add_ids(list(missing))
        generation, ids = self._generation, self._ids
        parts = []  # each text's chunk ids
        if index is not None:
            lids = np.concatenate([e.word_ids[1] for e, b in zip(entries, by_index) if b])
            all_ids = self._index_ids(index, lids)
            if all_ids is None:  # too many new chunks at once
                return
            pos = 0
            for c, b in zip(split, by_index):
                if b:
                    parts.append(all_ids[pos:pos + len(c)])
                    pos += len(c)
                else:
                    parts.append(None)
        else:
            parts = [None] * len(texts)
        if self._generation != generation:  # the ids were emptied while learning: no entries
            return
        if len(_RECENT) + sum(t not in _RECENT for t in texts) > RECENT_TEXTS:
            _RECENT.clear()
        for t, entry, part in zip(texts, entries, parts):
            if part is None:
                part = np.fromiter(map(ids.__getitem__, entry.chunks), dtype=np.int64, count=len(entry.chunks))
            entry.owner, entry.ids, entry.tokens = self, part, None  # tokens made when asked for
            _RECENT[t] = entry

    def _index_ids(self, index: dict, lids: np.ndarray) -> np.ndarray | None:
        """The chunk ids of the words with ids ``lids`` in ``index`` (see ``remember_split``);
        chunks not seen yet are learned. None when they are too many (the caller goes without)."""
        if index is not self._lid_index:  # another index (langid's was emptied): a new translation
            self._lid_index, self._lid_words = index, []
            self._lid_map = np.full(max(1024, len(index)), -1, dtype=np.int64)
        if len(self._lid_map) < len(index):
            grown = np.full(max(2 * len(self._lid_map), len(index)), -1, dtype=np.int64)
            grown[:len(self._lid_map)] = self._lid_map
            self._lid_map = grown
        out = self._lid_map[lids]
        unknown = out < 0
        if not unknown.any():
            return out
        flag = np.zeros(len(index), dtype=np.bool_)  # the distinct unknown ids, without sorting
        flag[lids[unknown]] = True
        need = np.flatnonzero(flag)
        words = self._lid_words
        if len(words) < len(index):  # the index's keys in id order (ids are insertion order)
            words.extend(islice(index, len(words), None))
        chunks = list(map(words.__getitem__, need.tolist()))
        ids = self._ids
        missing = list(filterfalse(ids.__contains__, chunks))  # distinct: the index's words are
        if len(missing) >= MEMO_SIZE // 2:
            return None
        if len(ids) + len(missing) > MEMO_SIZE:
            self._clear_ids()
            return self._index_ids(index, lids)
        base = len(self._id_chunks)
        if missing:
            self._learn(missing)
            self._add_ids(missing)
        if len(missing) == len(chunks):  # all new (the common case): ids given in their order
            self._lid_map[need] = np.arange(base, base + len(chunks), dtype=np.int64)
        else:
            self._lid_map[need] = np.fromiter(map(ids.__getitem__, chunks), dtype=np.int64, count=len(chunks))
        return self._lid_map[lids]

    def chunk_tokens(self, chunks: list[str]) -> list[tuple[str, ...]]:
        """The tokens of each chunk (chunks hold no whitespace)."""
        try:
            return list(map(self._memo.__getitem__, chunks))  # all seen before: the common case
        except KeyError:
            pass
        self._learn(chunks)
        try:
            return list(map(self._memo.__getitem__, chunks))
        except KeyError:  # the memo was emptied while learning a large batch
            self._memo = {}
            return [self._tokenize_alone(c) for c in chunks]

    def sentence_codes(self, chunks: list[str]) -> np.ndarray:
        """``_sentence_effect`` of each chunk's tokens, packed in one integer (``_encode_effect``),
        remembered per chunk."""
        get = self._sentence_memo.__getitem__
        try:
            return np.fromiter(map(get, chunks), dtype=np.int64, count=len(chunks))
        except KeyError:
            self._learn_sentences(set(chunks))
        return np.fromiter(map(get, chunks), dtype=np.int64, count=len(chunks))

    def text_sentence_codes(self, text: str) -> np.ndarray:
        """``sentence_codes(text.split())``, gathered by chunk id for a prefetched text."""
        entry = self._prefetched(text)
        if entry is None:
            return self.sentence_codes(self.split(text))
        ids = entry.ids
        codes = self._id_codes[ids]
        unknown = codes < 0
        if unknown.any():
            self._fill_codes(np.unique(ids[unknown]))
            codes = self._id_codes[ids]
        return codes

    def _learn_sentences(self, chunks: set[str]) -> None:
        memo = self._sentence_memo
        missing = chunks.difference(memo)
        if len(memo) + len(missing) > MEMO_SIZE:
            memo.clear()
            missing = chunks
        # no token is an end mark: the chunk only ends a pending end mark, when one of its tokens
        # is not punctuation, i.e. when one of its characters is not (a letter, a digit: \w)
        no_end = set(filter(SENTENCIZER_PUNCT.isdisjoint, missing))
        words = set(filter(_WORD_CHAR_RE.search, no_end))
        memo.update(dict.fromkeys(words, _NO_END_WORD))
        for c in no_end.difference(words):
            memo[c] = _NO_END_PUNCT if _is_punct(c) else _NO_END_WORD
        rest = list(missing.difference(no_end))
        for c, toks in zip(rest, self.chunk_tokens(rest)):
            if len(toks) == 2 and toks[1] in SENTENCIZER_PUNCT and toks[0].isalpha():  # "word."
                memo[c] = _WORD_END
            else:
                memo[c] = _encode_effect(_sentence_effect(toks))

    def text_stats(self, text: str) -> tuple[int, int, int, int, int]:
        """``token_stats`` of the tokens of ``text``: each chunk's counts are remembered packed in
        one integer (``STATS_BITS`` bits a field), so the sum of the packed integers is the packed
        sums (no field comes near 2**40)."""
        entry = self._prefetched(text)
        if entry is not None:  # a gather by chunk id
            return tuple(self._id_stats[entry.ids].sum(axis=0).tolist())
        chunks = self.split(text)
        memo = self._stats_memo
        try:
            packed = sum(map(memo.__getitem__, chunks))
        except KeyError:
            self._fill_stats(chunks)
            try:
                packed = sum(map(memo.__getitem__, chunks))
            except KeyError:  # the memo was emptied while learning
                packed = sum(map(_packed_stats, self.chunk_tokens(chunks)))
        mask = (1 << STATS_BITS) - 1
        return tuple((packed >> (i * STATS_BITS)) & mask for i in range(5))

    def _fill_stats(self, chunks: list[str]) -> None:
        memo, rules = self._stats_memo, self._rules
        missing = [c for c in dict.fromkeys(chunks) if c not in memo]
        if len(memo) + len(missing) > MEMO_SIZE:
            memo.clear()
            missing = list(dict.fromkeys(chunks))
        rest = []
        for c in missing:
            if c.isalpha() and c not in rules:  # one token, a word of letters
                memo[c] = _ALPHA_STATS[len(c)]
            else:
                rest.append(c)
        for c, toks in zip(rest, self.chunk_tokens(rest)):
            memo[c] = _packed_stats(toks)

    def _tokenize_alone(self, chunk: str) -> tuple[str, ...]:
        chunk = _SURROGATE_RE.sub("\ufffd", chunk)
        with self._nlp.memory_zone():
            return tuple(t.text for t in self._tokenizer(chunk) if not t.is_space)

    def split(self, text: str) -> list[str]:
        """``text.split()`` (remembered for recent texts: the same string objects, hashes known)."""
        entry = _RECENT.get(text)
        return text.split() if entry is None else entry.chunks

    def _prefetched(self, text: str) -> Recent | None:
        """The recent entry of ``text`` where it holds chunk ids here."""
        entry = _RECENT.get(text)
        return entry if entry is not None and entry.owner is self and entry.ids is not None else None

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text``. The heuristic stages of one pipeline split the same documents one
        after the other, so the last ``RECENT_TEXTS`` texts' tokens are kept (callers must not
        modify the list)."""
        entry = _RECENT.get(text)
        if entry is None or entry.owner is not self:
            if entry is None:
                if len(_RECENT) >= RECENT_TEXTS:
                    _RECENT.clear()
                _RECENT[text] = entry = Recent(text.split())
            entry.owner, entry.ids, entry.tokens = self, None, None
        if entry.tokens is None:
            if entry.ids is None:
                entry.tokens = list(chain.from_iterable(self.chunk_tokens(entry.chunks)))
            else:  # a prefetched text: its chunks' tokens by id
                entry.tokens = list(chain.from_iterable(map(self._id_tokens.__getitem__, entry.ids.tolist())))
        return entry.tokens

    def glued(self, text: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(each token's length, the code points of the tokens glued together) of a prefetched
        text, from its chunk ids (a chunk's tokens glued are the chunk); None for other texts."""
        entry = self._prefetched(text)
        if entry is None:
            return None
        ids = entry.ids
        counts = self._id_ntok[ids]
        ends = np.cumsum(counts)
        # positions in _tok_lens: each chunk's run of token lengths, one after the other
        at = np.repeat(self._id_toff[ids] - (ends - counts), counts) + np.arange(int(ends[-1]) if len(ends) else 0)
        glued = "".join(entry.chunks)
        if _SURROGATE_RE.search(glued):  # the tokens hold U+FFFD there
            glued = "".join(self.tokens(text))
        return self._tok_lens[at], np.frombuffer(glued.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


STATS_BITS = 48
_ONE_WORD = 1 | 1 << STATS_BITS | 1 << (3 * STATS_BITS) | 1 << (4 * STATS_BITS)  # 1 token, 1 word, both with a letter
_WORD_CHAR = 1 << (2 * STATS_BITS)  # one character in words


class _AlphaStats(dict):
    """Word length -> packed ``token_stats`` of a chunk that is one word of letters."""

    def __missing__(self, n: int) -> int:
        self[n] = v = _ONE_WORD + n * _WORD_CHAR
        return v


_ALPHA_STATS = _AlphaStats()


def token_stats(toks) -> tuple[int, int, int, int, int]:
    """(tokens, words, characters in words, tokens holding a letter, words holding a letter), where a
    word is a token holding a character that is not punctuation (DataTrove's ``PUNCTUATION_SET``)."""
    words = [t for t in toks if not PUNCTUATION.issuperset(t)]
    return (len(toks), len(words), sum(map(len, words)), sum(map(_has_letter, toks)), sum(map(_has_letter, words)))


def _packed_stats(toks) -> int:
    """``token_stats`` of ``toks`` packed in one integer, ``STATS_BITS`` bits a field: the sum of
    each token's (every field is a sum over tokens)."""
    return sum(_ALPHA_STATS[len(t)] if t.isalpha() else _token_packed(t) for t in toks)


@lru_cache(maxsize=65536)
def _token_packed(tok: str) -> int:
    return sum(v << (i * STATS_BITS) for i, v in enumerate(token_stats((tok,))))


def _has_letter(tok: str) -> bool:
    return tok.isalpha() or any(map(str.isalpha, tok))


_ASCII_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_MARKS = frozenset(",;:!?.")


_PLAIN_RE = re.compile(r'(["(]?)([^\W\d_]+)([,;:!?.]?)([")]?)')  # the shape plain_tokens handles


def rule_cores(rules) -> frozenset[str]:
    """Every string left of a special case after taking off at most one character at its start and
    two at its end: where a plain word is none of these, no rule is the word with marks around it."""
    out = set()
    for r in rules:
        for a in (0, 1):
            for b in (0, 1, 2):
                if len(r) > a + b:
                    out.add(r[a:len(r) - b])
    return frozenset(out)


def plain_tokens(chunk: str, rules, cores=None) -> tuple[str, ...] | None:
    """spaCy's tokens of a plain word with simple punctuation around it, or None when not sure.

    Handled: an optional ``"`` or ``(`` before, letters, an optional mark (``, ; : ! ? .``), an
    optional ``"`` or ``)`` after (not a mark and ``)``: ``:)`` is an emoticon), where neither the chunk nor any part of it left after taking
    marks off is one of spaCy's special cases (``rules``; ``cores``: their ``rule_cores``, to skip
    the check for most words). Then each mark is a prefix or suffix
    rule of its own and the letters are one token (no rule matches inside letters). A ``.`` is
    split off only after an ASCII lower-case letter or two ASCII capitals (spaCy's rules for a
    final period; ``A.`` and ``McD.`` stay whole)."""
    m = _PLAIN_RE.fullmatch(chunk)
    if m is None:
        return None
    pre, core, mark, close = m.groups()
    if not core.isalpha() or (mark and close == ")"):  # ":)" and ";)" are emoticons to spaCy
        return None
    if mark == "." and not (core[-1] in _ASCII_LOWER or (core[-1] in _ASCII_UPPER and len(core) > 1
                                                          and core[-2] in _ASCII_UPPER)):
        return None
    if cores is None or core in cores:
        for p in {pre, ""}:
            for k in {mark, ""}:
                for q in {close, ""}:
                    if p + core + k + q in rules:
                        return None
    return tuple(x for x in (pre, core, mark, close) if x)


# English words joined by hyphens or numbers joined by one, with a possessive, with quotes, brackets
# and marks around them: spaCy's English rules split a hyphen, "--" or an em dash between letters
# and a hyphen between numbers (infixes), "'s" and "’s" at the end (suffixes), and each of these
# quotes, brackets and marks at either end (prefixes, suffixes). Only for languages listed here:
# others' rules differ (German keeps "well-known", French splits "Peter'" "s").
COMPOUND_LANGUAGES = frozenset({"en"})
COMPOUND_OPENERS = "\"([_'\u201c\u2018\u2014"
COMPOUND_CLOSERS = ",;:!?.\")]_'\u201d\u2019\u2014"
_NUMBER_PART = "[0-9]+(?:[:,][0-9]+)*"
# a word, with apostrophes inside (O'Brien, rock'n'roll: one token) but no "'s" at its end
_WORD_PART = "[A-Za-z]+(?:['\u2019](?![sS](?![A-Za-z]))[A-Za-z]+)*"
_COMPOUND_RE = re.compile(
    f"([{re.escape(COMPOUND_OPENERS)}]*)"
    f"({_WORD_PART}(?:(?:--|-|\u2014){_WORD_PART})*|{_NUMBER_PART}(?:-{_NUMBER_PART})*)"
    "((?:['\u2019][sS])?)"
    f"([{re.escape(COMPOUND_CLOSERS)}]*)")
_JOINER_RE = re.compile("(--|-|\u2014)")
# where spaCy's English rules split a final "." off: after a lower-case letter, a digit, a quote or
# one of its punctuation marks (not after a capital, a "." or a dash)
_BEFORE_PERIOD = frozenset("abcdefghijklmnopqrstuvwxyz0123456789,;:!?\")]_'\u201d\u2019")


def compound_tokens(chunk: str, rules: dict) -> tuple[str, ...] | None:
    """spaCy's English tokens of words of ASCII letters joined by ``-``, ``--`` or ``—`` (or numbers,
    ``1:2,3``, joined by ``-``), an optional ``'s``/``’s`` after them and any of
    ``COMPOUND_OPENERS`` before and ``COMPOUND_CLOSERS`` after, each a token of its own; None when
    not sure. A ``.`` is split off only after a lower-case letter, a digit or one of the closers
    but ``.`` and ``—`` (not in ``A.``, ``..``, ``—.``). The result is kept only when no run of its tokens glued
    together is one of spaCy's special cases (``rules``; a rule that is one token left as it is
    excepted): the affix rules find these tokens, and spaCy's special cases, which would change
    them (``:)``, ``'em``, ``can't``), match none of their runs. ``tests/test_words.py`` compares
    combinations of the shape with spaCy, and every such chunk of real text."""
    m = _COMPOUND_RE.fullmatch(chunk)
    if m is None:
        return None
    pre, core, poss, close = m.groups()
    if "." in close:
        for i, ch in enumerate(close):
            if ch == "." and (close[i - 1] if i else (poss or core)[-1]) not in _BEFORE_PERIOD:
                return None
    toks = [*pre, *_JOINER_RE.split(core), *([poss] if poss else ()), *close]
    for i in range(len(toks)):
        glued = ""
        for j in range(i, len(toks)):
            glued += toks[j]
            rule = rules.get(glued)
            if rule is not None and not (i == j and [r.get(65) for r in rule] == [glued]):  # 65: ORTH
                return None
    return tuple(toks)


@lru_cache(maxsize=None)
def spacy_words(language: str) -> SpacyWords:
    """One splitter (and one memo) per language per process."""
    return SpacyWords(language)


def check_splitter(words: str, language: str) -> None:
    """Fail at start with a clear message when the configured splitter cannot be built."""
    if words not in WORD_SPLITTERS:
        raise ValueError(f"words = {words!r}; allowed: {', '.join(WORD_SPLITTERS)}")
    if words == "spacy":
        spacy_words(language)


# --- spaCy's sentencizer, over the tokens of one line --------------------------------------------

# spacy.pipeline.Sentencizer.default_punct_chars
SENTENCIZER_PUNCT = frozenset(
    "!.?։؟۔܀܁܂߹।॥၊။።፧፨᙮᜵᜶᠃᠉᥄᥅᪨᪩᪪᪫᭚᭛᭞᭟᰻᰼᱾᱿‼‽⁇⁈⁉⸮⸼꓿꘎꘏꛳꛷꡶꡷꣎꣏꤯꧈꧉꩝꩞꩟꫰꫱꯫﹒﹖﹗！．？"
    "𐩖𐩗𑁇𑁈𑂾𑂿𑃀𑃁𑅁𑅂𑅃𑇅𑇆𑇍𑇞𑇟𑈸𑈹𑈻𑈼𑊩𑑋𑑌𑗂𑗃𑗉𑗊𑗋𑗌𑗍𑗎𑗏𑗐𑗑𑗒𑗓𑗔𑗕𑗖𑗗𑙁𑙂𑜼𑜽𑜾𑩂𑩃𑪛𑪜𑱁𑱂𖩮𖩯𖫵𖬷𖬸𖭄𛲟𝪈｡。"
)
_WS_RUN_RE = re.compile(r"\s+")


@lru_cache(maxsize=65536)
def _is_punct(tok: str) -> bool:
    """spaCy's ``is_punct``: every character is Unicode punctuation (category P*)."""
    return all(unicodedata.category(c).startswith("P") for c in tok)


def count_sentences(line: str, words: str = "spacy", language: str = "en", chunks: list[str] | None = None) -> int:
    """How many sentences DataTrove's ``split_into_sentences`` finds in ``line`` (stripped, not
    empty): spaCy's sentencizer starts a sentence at the first token that is neither punctuation
    nor an end mark after a token that is an end mark. Whitespace runs other than one space are
    tokens of their own there (neither punctuation nor end marks)."""
    if words == "regex":
        return len(regex_sentences(line))
    if chunks is None:
        chunks = line.split()
    effects = map(_decode_effect, spacy_words(language).sentence_codes(chunks).tolist())
    n, seen_end = 1, False
    if len(line) - sum(map(len, chunks)) == line.count(" ") == len(chunks) - 1:  # single spaces only
        for eff in effects:
            n += eff[2] if seen_end else eff[0]
            seen_end = eff[3] if seen_end else eff[1]
        return n
    gaps = [g != " " for g in _WS_RUN_RE.findall(line)]  # a whitespace token between chunks i-1 and i
    for i, eff in enumerate(effects):
        if i and gaps[i - 1] and seen_end:  # a whitespace token is neither punctuation nor an end mark
            n += 1
            seen_end = False
        n += eff[2] if seen_end else eff[0]
        seen_end = eff[3] if seen_end else eff[1]
    return n


_EFFECT_BITS = 30  # a chunk starts fewer than 2**30 sentences


def _encode_effect(eff: tuple[int, bool, int, bool]) -> int:
    """``_sentence_effect``'s four values in one integer: count, flag, count, flag from the lowest
    bits (``_EFFECT_BITS`` bits a count, one a flag)."""
    a0, s0, a1, s1 = eff
    return a0 | s0 << _EFFECT_BITS | a1 << (_EFFECT_BITS + 1) | s1 << (2 * _EFFECT_BITS + 1)


def _decode_effect(code: int) -> tuple[int, bool, int, bool]:
    mask = (1 << _EFFECT_BITS) - 1
    return (code & mask, bool(code >> _EFFECT_BITS & 1), code >> (_EFFECT_BITS + 1) & mask,
            bool(code >> (2 * _EFFECT_BITS + 1) & 1))


_NO_END_WORD = _encode_effect((0, False, 1, False))  # a chunk without end marks, holding a word
_NO_END_PUNCT = _encode_effect((0, False, 0, True))  # one made of punctuation only
_WORD_END = _encode_effect((0, True, 1, True))  # a word then an end mark
_WORD_CHAR_RE = re.compile(r"[^\W_]")  # a letter or digit (not "_") is never punctuation


@nb.njit(cache=True)
def _line_sentences(codes, starts, ends) -> int:
    """The sentences of lines (chunks ``starts[k]:ends[k]`` of ``codes``, single spaces between
    them), summed: ``count_sentences``'s loop over packed effects."""
    mask = (1 << _EFFECT_BITS) - 1
    total = 0
    for k in range(len(starts)):
        n, seen_end = 1, 0
        for i in range(starts[k], ends[k]):
            c = codes[i]
            if seen_end:
                n += (c >> (_EFFECT_BITS + 1)) & mask
                seen_end = (c >> (2 * _EFFECT_BITS + 1)) & 1
            else:
                n += c & mask
                seen_end = (c >> _EFFECT_BITS) & 1
        total += n
    return total


def line_sentences(codes: np.ndarray, starts: list[int], stops: list[int]) -> int:
    """``count_sentences`` summed over lines given as ranges ``starts[k]:stops[k]`` of a document's
    chunk codes (``SpacyWords.text_sentence_codes``); each line's chunks separated by single spaces."""
    if not starts:
        return 0
    return int(_line_sentences(codes, np.array(starts, dtype=np.int64), np.array(stops, dtype=np.int64)))


def _sentence_effect(toks: tuple[str, ...]) -> tuple[int, bool, int, bool]:
    """What a chunk's tokens do to the sentencizer: (sentences started, end mark pending after it)
    when no end mark is pending before it, then the same when one is."""
    out = []
    for seen_end in (False, True):
        n = 0
        for t in toks:
            if t in SENTENCIZER_PUNCT:
                seen_end = True
            elif seen_end and not _is_punct(t):
                n += 1
                seen_end = False
        out += [n, seen_end]
    return tuple(out)


@lru_cache(maxsize=None)
def _sentencizer(language: str):
    import spacy

    nlp = spacy.blank(language)
    nlp.add_pipe("sentencizer")
    return nlp


def spacy_sentences(text: str, language: str = "en") -> list[str]:
    """DataTrove's ``split_into_sentences``: ``text`` cut after each sentence spaCy's sentencizer
    finds (pieces keep the whitespace between sentences; the last piece runs to the end). Slow
    (the whole spaCy pipeline); used only by C4's ``split_paragraph = false``."""
    nlp = _sentencizer(language)
    nlp.max_length = max(nlp.max_length, len(text) + 10)
    with nlp.memory_zone():
        ends = [s.end_char for s in nlp(text).sents]
    return [text[a:b] for a, b in zip([0] + ends[:-1], ends[:-1] + [len(text)])]
