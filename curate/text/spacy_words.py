"""spaCy's tokens of a text (DataTrove's ``split_into_words``), chunk by chunk, remembered.

The tokens are those of spaCy's rule-based tokenizer of a blank pipeline for ``language``
(``spacy.blank(language)``: no model, no download), whitespace-only tokens removed. Natural text
repeats its whitespace-separated chunks (``text.split()``), so each chunk is tokenized once per
process and remembered (a bounded memo of a pure function, ``MEMO_SIZE`` chunks). A chunk is
tokenized on its own, so the result never depends on which documents came before (spaCy's own
output differs from that rarely, where its special-case matcher looks at the neighbouring chunk).
Chunks whose tokens are known without spaCy skip it (``curate.text.spacy_shortcuts``).

What is learned of one text (its chunks, langid's word ids, chunk ids here, tokens) is a ``Recent``
kept in the caller's ``recent`` dict (a stage passes its batch's ``BatchContext.words``; at most
``RECENT_TEXTS`` texts), so the stages of a chain split each text once; without one, each call
computes what it needs.
"""
from __future__ import annotations

import re
from functools import lru_cache
from itertools import chain, filterfalse, islice, repeat

import numpy as np

from curate.gc_pause import gc_paused
from curate.text.sentence_codes import chunk_codes
from curate.text.spacy_shortcuts import (ASCII_LOWER, COMPOUND_LANGUAGES, MARKS, SHORTCUT_LANGUAGES, compound_tokens,
                                         plain_tokens, rule_cores)
from curate.text.token_stats import ALPHA_STATS, ONE_WORD, STATS_BITS, WORD_CHAR, packed_stats

MEMO_SIZE = 500_000  # chunks remembered per language; the memo is emptied when full
# spaCy's tokenizer takes time quadratic in a chunk's length where the chunk splits into many prefix / suffix
# tokens (a run of "。", commas, quotes or emoji: 20,000 characters take a minute, 100,000 never end). A chunk
# longer than LONG_CHUNK, or holding more than MAX_CHUNK_MARKS characters that are not word characters (text has
# almost none: a long URL), is tokenized in pieces of LONG_PIECE characters: a few microseconds a character.
LONG_CHUNK = 256
MAX_CHUNK_MARKS = 64
LONG_PIECE = 32
_MARK_RE = re.compile(r"\W")
RECENT_TEXTS = 2048  # most texts a ``recent`` dict takes (its memory stays bounded; others go without)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class Recent:
    """What is known of one text: ``chunks`` (``text.split()``; not to be modified), ``word_ids``
    (langid's, or None: ``(index, ids)`` where ``index`` is a dict word -> id whose ids are its
    insertion order and only grow, langid's fastText word index, and ``ids`` its id of each chunk)
    and, for the ``SpacyWords`` that is its ``owner``, the chunks' ids there (None: not prefetched;
    valid while ``generation`` is the owner's) and the text's tokens (None: not made yet)."""

    __slots__ = ("chunks", "word_ids", "owner", "ids", "generation", "tokens")

    def __init__(self, chunks: list[str], word_ids: tuple | None = None):
        self.chunks, self.word_ids = chunks, word_ids
        self.owner = self.ids = self.tokens = None
        self.generation = 0


def _too_long(chunk: str) -> bool:
    n = len(chunk)
    return n > LONG_CHUNK or (n > MAX_CHUNK_MARKS and len(_MARK_RE.findall(chunk)) > MAX_CHUNK_MARKS)


def _pieces(chunk: str) -> list[str]:
    return [chunk[i:i + LONG_PIECE] for i in range(0, len(chunk), LONG_PIECE)]


def rule_based_pipeline(language: str):
    """``spacy.blank(language)``, refused (``ValueError``, said for a config) where its tokenizer is not
    spaCy's rule-based ``Tokenizer``: Chinese (a character or jieba / pkuseg segmenter), Japanese, Korean,
    Thai, Vietnamese (segmenters that need an extra package, and that are not rule-based either). Everything
    here (chunk by chunk tokenizing, special cases, the pieces of long chunks) relies on that tokenizer."""
    import spacy
    from spacy.tokenizer import Tokenizer

    fix = "set words = 'regex' (Quarry's splitter, no spaCy), or another language"
    try:
        nlp = spacy.blank(language)
    except ImportError as e:  # ja, ko, th, vi: a segmenter from another package
        raise ValueError(f"language = {language!r}: spaCy's tokenizer for it is a word segmenter from another "
                         f"package, not its rule-based tokenizer that words = 'spacy' uses ({e}); {fix}") from e
    except Exception as e:
        raise ValueError(f"language = {language!r}: spaCy has no tokenizer for it ({e}); {fix}") from e
    tokenizer = getattr(nlp, "tokenizer", None)
    if type(tokenizer) is not Tokenizer:  # zh: ChineseTokenizer (and ja, ko, ... where their package is there)
        raise ValueError(f"language = {language!r}: spaCy's tokenizer for it is {type(tokenizer).__name__}, a "
                         f"word segmenter, not the rule-based tokenizer that words = 'spacy' uses; {fix}")
    return nlp


class SpacyWords:
    """spaCy's tokens of a text, chunk by chunk, remembered."""

    def __init__(self, language: str):
        try:
            import spacy
        except ImportError as e:  # a config error, raised when the stage is built
            raise ValueError(
                "words = 'spacy' (DataTrove's word splitting) needs the spacy package: "
                "pip install spacy (no model is downloaded), or set words = 'regex'") from e
        self._nlp = rule_based_pipeline(language)
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
        """Forget every remembered chunk (the pipeline stays loaded)."""
        for memo in (self._memo, self._sentence_memo, self._stats_memo):
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
        self._generation = getattr(self, "_generation", 0) + 1  # ids given before this are void
        self._lid_index = None  # the word index (see Recent.word_ids) whose ids _lid_map translates
        self._lid_map = np.zeros(0, dtype=np.int64)  # its id -> chunk id, -1: not known yet
        self._lid_words: list[str] = []  # its id -> word

    def _add_ids(self, new: list[str]) -> None:
        """Give ids to chunks without one (their tokens and stats are learned here if need be)."""
        toks = self.chunk_tokens(new)  # learned here where the memo was emptied while learning
        try:
            packed = list(map(self._stats_memo.__getitem__, new))
        except KeyError:
            packed = list(map(packed_stats, toks))
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
        long = [c for c in missing if _too_long(c)]
        if long:  # tokenized piece by piece (see LONG_CHUNK)
            missing = [c for c in missing if not _too_long(c)]
            pieces = {c: _pieces(c) for c in long}
            self._learn(set(chain.from_iterable(pieces.values())))
            for c, parts in pieces.items():
                memo[c] = toks = tuple(chain.from_iterable(map(self._piece_tokens, parts)))
                stats[c] = packed_stats(toks)
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
            stats[chunk] = packed_stats(toks)
            first = stop + 1

    def _shortcuts(self, chunks) -> list[str]:
        """Tokenize the chunks whose spaCy tokens are known without running spaCy; return the others.
        See ``plain_tokens``; ``tests/test_words.py`` checks them against spaCy for every language
        in ``SHORTCUT_LANGUAGES``."""
        memo, stats, rules = self._memo, self._stats_memo, self._rules
        alpha = set(filter(str.isalpha, chunks))  # a word of letters is one token (unless a rule)
        alpha.difference_update(rules)
        memo.update(zip(alpha, zip(alpha)))
        stats.update(zip(alpha, map(ALPHA_STATS.__getitem__, map(len, alpha))))
        rest = []
        cores = self._rule_cores
        others = set(chunks).difference(alpha)
        # the commonest case in bulk: a word of letters then one mark (".": after a lower-case ASCII
        # letter), the word none of the rule cores (plain_tokens' tokens, without its regex)
        marked = {c for c in others if c[-1] in MARKS and c[:-1].isalpha()
                  and (c[-1] != "." or c[-2] in ASCII_LOWER)}
        marked = {c for c in marked if c[:-1] not in cores}
        memo.update((c, (c[:-1], c[-1])) for c in marked)
        stats.update((c, ONE_WORD + 1 + (len(c) - 1) * WORD_CHAR) for c in marked)
        for c in others.difference(marked):
            toks = plain_tokens(c, rules, cores)
            if toks is None:
                rest.append(c)
            else:  # one word of letters, the rest punctuation marks of one character
                memo[c] = toks
                stats[c] = ONE_WORD + (len(toks) - 1) + (len(c) - len(toks) + 1) * WORD_CHAR
        if self._compound:  # hyphenated words, possessives, curly quotes (see compound_tokens)
            others, full = rest, self._tokenizer.rules or {}
            longest = max(map(len, full), default=0)
            rest = []
            for c in others:
                toks = compound_tokens(c, full, longest)
                if toks is None:
                    rest.append(c)
                else:
                    memo[c] = toks
                    stats[c] = packed_stats(toks)
        return rest

    def prefetch(self, texts: list[str], recent: dict) -> None:
        """Learn the chunks of many texts at once: one spaCy call (and one ``memory_zone``) for a
        batch instead of one per text. Each text's chunk ids go into its ``Recent`` in ``recent``
        (text -> Recent; texts langid has seen are there with its word ids)."""
        with gc_paused():
            self._prefetch(texts, recent)

    def _prefetch(self, texts: list[str], recent: dict) -> None:
        todo, room = [], RECENT_TEXTS - len(recent)
        for t in dict.fromkeys(texts):
            entry = recent.get(t)
            if entry is None and room > 0:
                entry, room = Recent(t.split()), room - 1
            if entry is not None:
                todo.append((t, entry))
        # not those prefetched or split here (ids of an older generation are void: prefetched again)
        todo = [(t, e) for t, e in todo
                if not (e.owner is self and (e.ids is None or e.generation == self._generation))]
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
        for t, entry, part in zip(texts, entries, parts):
            if part is None:
                part = np.fromiter(map(ids.__getitem__, entry.chunks), dtype=np.int64, count=len(entry.chunks))
            entry.owner, entry.ids, entry.tokens = self, part, None  # tokens made when asked for
            entry.generation = generation
            recent[t] = entry

    def _index_ids(self, index: dict, lids: np.ndarray) -> np.ndarray | None:
        """The chunk ids of the words with ids ``lids`` in ``index`` (see ``Recent.word_ids``);
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
        """``sentence_effect`` of each chunk's tokens, packed in one integer (``encode_effect``),
        remembered per chunk."""
        get = self._sentence_memo.__getitem__
        try:
            return np.fromiter(map(get, chunks), dtype=np.int64, count=len(chunks))
        except KeyError:
            self._learn_sentences(set(chunks))
        return np.fromiter(map(get, chunks), dtype=np.int64, count=len(chunks))

    def text_sentence_codes(self, text: str, recent: dict | None = None) -> np.ndarray:
        """``sentence_codes(text.split())``, gathered by chunk id for a prefetched text."""
        entry = self._prefetched(text, recent)
        if entry is None:
            return self.sentence_codes(self.split(text, recent))
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
        memo.update(chunk_codes(missing, self.chunk_tokens))

    def text_stats(self, text: str, recent: dict | None = None) -> tuple[int, int, int, int, int]:
        """``token_stats`` of the tokens of ``text``: each chunk's counts are remembered packed in
        one integer (``STATS_BITS`` bits a field), so the sum of the packed integers is the packed
        sums (no field comes near 2**40)."""
        entry = self._prefetched(text, recent)
        if entry is not None:  # a gather by chunk id
            return tuple(self._id_stats[entry.ids].sum(axis=0).tolist())
        chunks = self.split(text, recent)
        memo = self._stats_memo
        try:
            packed = sum(map(memo.__getitem__, chunks))
        except KeyError:
            self._fill_stats(chunks)
            try:
                packed = sum(map(memo.__getitem__, chunks))
            except KeyError:  # the memo was emptied while learning
                packed = sum(map(packed_stats, self.chunk_tokens(chunks)))
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
                memo[c] = ALPHA_STATS[len(c)]
            else:
                rest.append(c)
        for c, toks in zip(rest, self.chunk_tokens(rest)):
            memo[c] = packed_stats(toks)

    def _piece_tokens(self, piece: str) -> tuple[str, ...]:
        toks = self._memo.get(piece)
        return self._tokenize_alone(piece) if toks is None else toks

    def _tokenize_alone(self, chunk: str) -> tuple[str, ...]:
        if _too_long(chunk):
            return tuple(chain.from_iterable(map(self._tokenize_alone, _pieces(chunk))))
        chunk = _SURROGATE_RE.sub("\ufffd", chunk)
        with self._nlp.memory_zone():
            return tuple(t.text for t in self._tokenizer(chunk) if not t.is_space)

    def split(self, text: str, recent: dict | None = None) -> list[str]:
        """``text.split()`` (from ``recent`` where it is there: the same string objects, hashes known)."""
        entry = None if recent is None else recent.get(text)
        return text.split() if entry is None else entry.chunks

    def _prefetched(self, text: str, recent: dict | None) -> Recent | None:
        """The entry of ``text`` in ``recent`` where it holds chunk ids here."""
        entry = None if recent is None else recent.get(text)
        if entry is None or entry.owner is not self or entry.ids is None or entry.generation != self._generation:
            return None
        return entry

    def tokens(self, text: str, recent: dict | None = None) -> list[str]:
        """The tokens of ``text``. The heuristic stages of one chain split the same documents one
        after the other: with ``recent``, a text's tokens are made once and kept in its entry
        (callers must not modify the list)."""
        if recent is None:
            return list(chain.from_iterable(self.chunk_tokens(text.split())))
        entry = recent.get(text)
        if entry is None or entry.owner is not self:
            if entry is None:
                if len(recent) >= RECENT_TEXTS:  # full: split without it
                    return list(chain.from_iterable(self.chunk_tokens(text.split())))
                recent[text] = entry = Recent(text.split())
            entry.owner, entry.ids, entry.tokens = self, None, None
        if entry.tokens is None:
            if self._prefetched(text, recent) is None:
                entry.tokens = list(chain.from_iterable(self.chunk_tokens(entry.chunks)))
            else:  # a prefetched text: its chunks' tokens by id
                entry.tokens = list(chain.from_iterable(map(self._id_tokens.__getitem__, entry.ids.tolist())))
        return entry.tokens

    def glued(self, text: str, recent: dict | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(each token's length, the code points of the tokens glued together) of a prefetched
        text, from its chunk ids (a chunk's tokens glued are the chunk); None for other texts."""
        entry = self._prefetched(text, recent)
        if entry is None:
            return None
        ids = entry.ids
        counts = self._id_ntok[ids]
        ends = np.cumsum(counts)
        # positions in _tok_lens: each chunk's run of token lengths, one after the other
        at = np.repeat(self._id_toff[ids] - (ends - counts), counts) + np.arange(int(ends[-1]) if len(ends) else 0)
        glued = "".join(entry.chunks)
        if _SURROGATE_RE.search(glued):  # the tokens hold U+FFFD there
            glued = "".join(self.tokens(text, recent))
        return self._tok_lens[at], np.frombuffer(glued.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


@lru_cache(maxsize=None)
def spacy_words(language: str) -> SpacyWords:
    """One splitter (and one memo) per language per process."""
    return SpacyWords(language)
