"""What one chunk's tokens do to spaCy's sentencizer, packed in one integer, and the sum over lines.

spaCy's ``sentencizer`` starts a sentence at the first token that is neither punctuation nor an end
mark after a token that is an end mark. A chunk's effect (sentences started and whether an end mark
is pending after it, once without and once with one pending before it) depends on its tokens only,
so ``SpacyWords`` remembers it per chunk and a line's count is a loop over its chunks' codes.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import numba as nb
import numpy as np

# spacy.pipeline.Sentencizer.default_punct_chars
SENTENCIZER_PUNCT = frozenset(
    "!.?։؟۔܀܁܂߹।॥၊။።፧፨᙮᜵᜶᠃᠉᥄᥅᪨᪩᪪᪫᭚᭛᭞᭟᰻᰼᱾᱿‼‽⁇⁈⁉⸮⸼꓿꘎꘏꛳꛷꡶꡷꣎꣏꤯꧈꧉꩝꩞꩟꫰꫱꯫﹒﹖﹗！．？"
    "𐩖𐩗𑁇𑁈𑂾𑂿𑃀𑃁𑅁𑅂𑅃𑇅𑇆𑇍𑇞𑇟𑈸𑈹𑈻𑈼𑊩𑑋𑑌𑗂𑗃𑗉𑗊𑗋𑗌𑗍𑗎𑗏𑗐𑗑𑗒𑗓𑗔𑗕𑗖𑗗𑙁𑙂𑜼𑜽𑜾𑩂𑩃𑪛𑪜𑱁𑱂𖩮𖩯𖫵𖬷𖬸𖭄𛲟𝪈｡。"
)


@lru_cache(maxsize=65536)
def is_punct(tok: str) -> bool:
    """spaCy's ``is_punct``: every character is Unicode punctuation (category P*)."""
    return all(unicodedata.category(c).startswith("P") for c in tok)


_EFFECT_BITS = 30  # a chunk starts fewer than 2**30 sentences


def encode_effect(eff: tuple[int, bool, int, bool]) -> int:
    """``sentence_effect``'s four values in one integer: count, flag, count, flag from the lowest
    bits (``_EFFECT_BITS`` bits a count, one a flag)."""
    a0, s0, a1, s1 = eff
    return a0 | s0 << _EFFECT_BITS | a1 << (_EFFECT_BITS + 1) | s1 << (2 * _EFFECT_BITS + 1)


def decode_effect(code: int) -> tuple[int, bool, int, bool]:
    mask = (1 << _EFFECT_BITS) - 1
    return (code & mask, bool(code >> _EFFECT_BITS & 1), code >> (_EFFECT_BITS + 1) & mask,
            bool(code >> (2 * _EFFECT_BITS + 1) & 1))


_NO_END_WORD = encode_effect((0, False, 1, False))  # a chunk without end marks, holding a word
_NO_END_PUNCT = encode_effect((0, False, 0, True))  # one made of punctuation only
_WORD_END = encode_effect((0, True, 1, True))  # a word then an end mark
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


def sentence_effect(toks: tuple[str, ...]) -> tuple[int, bool, int, bool]:
    """What a chunk's tokens do to the sentencizer: (sentences started, end mark pending after it)
    when no end mark is pending before it, then the same when one is."""
    out = []
    for seen_end in (False, True):
        n = 0
        for t in toks:
            if t in SENTENCIZER_PUNCT:
                seen_end = True
            elif seen_end and not is_punct(t):
                n += 1
                seen_end = False
        out += [n, seen_end]
    return tuple(out)


def chunk_codes(chunks: set[str], chunk_tokens) -> dict[str, int]:
    """The packed ``sentence_effect`` of each of ``chunks``; ``chunk_tokens(list)`` gives the tokens
    of those holding an end mark (the others' effect is known from their characters)."""
    # no token is an end mark: the chunk only ends a pending end mark, when one of its tokens
    # is not punctuation, i.e. when one of its characters is not (a letter, a digit: \w)
    no_end = set(filter(SENTENCIZER_PUNCT.isdisjoint, chunks))
    words = set(filter(_WORD_CHAR_RE.search, no_end))
    out = dict.fromkeys(words, _NO_END_WORD)
    for c in no_end.difference(words):
        out[c] = _NO_END_PUNCT if is_punct(c) else _NO_END_WORD
    rest = list(chunks.difference(no_end))
    for c, toks in zip(rest, chunk_tokens(rest)):
        if len(toks) == 2 and toks[1] in SENTENCIZER_PUNCT and toks[0].isalpha():  # "word."
            out[c] = _WORD_END
        else:
            out[c] = encode_effect(sentence_effect(toks))
    return out
