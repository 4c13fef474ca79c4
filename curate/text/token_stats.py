"""The counts Gopher's quality rules need of a text's tokens, packed in one integer per chunk.

A word is a token holding a character that is not punctuation (DataTrove's ``PUNCTUATION_SET``).
Every count is a sum over tokens, so a chunk's counts packed in one integer (``STATS_BITS`` bits a
field) add up to a text's: ``SpacyWords`` remembers them per chunk with its tokens.
"""
from __future__ import annotations

from functools import lru_cache

from curate.text.punctuation import PUNCTUATION

STATS_BITS = 48
ONE_WORD = 1 | 1 << STATS_BITS | 1 << (3 * STATS_BITS) | 1 << (4 * STATS_BITS)  # 1 token, 1 word, both with a letter
WORD_CHAR = 1 << (2 * STATS_BITS)  # one character in words


class _AlphaStats(dict):
    """Word length -> packed ``token_stats`` of a chunk that is one word of letters."""

    def __missing__(self, n: int) -> int:
        self[n] = v = ONE_WORD + n * WORD_CHAR
        return v


ALPHA_STATS = _AlphaStats()


def token_stats(toks) -> tuple[int, int, int, int, int]:
    """(tokens, words, characters in words, tokens holding a letter, words holding a letter), where a
    word is a token holding a character that is not punctuation (DataTrove's ``PUNCTUATION_SET``)."""
    words = [t for t in toks if not PUNCTUATION.issuperset(t)]
    return (len(toks), len(words), sum(map(len, words)), sum(map(has_letter, toks)), sum(map(has_letter, words)))


def packed_stats(toks) -> int:
    """``token_stats`` of ``toks`` packed in one integer, ``STATS_BITS`` bits a field: the sum of
    each token's (every field is a sum over tokens)."""
    return sum(ALPHA_STATS[len(t)] if t.isalpha() else _token_packed(t) for t in toks)


@lru_cache(maxsize=65536)
def _token_packed(tok: str) -> int:
    return sum(v << (i * STATS_BITS) for i, v in enumerate(token_stats((tok,))))


def has_letter(tok: str) -> bool:
    return tok.isalpha() or any(map(str.isalpha, tok))


def is_word(tok: str) -> bool:
    """A token holding a character that is not punctuation (DataTrove's non-symbol word)."""
    return not PUNCTUATION.issuperset(tok)
