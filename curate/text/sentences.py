"""Sentence counting for C4's rule: DataTrove's spaCy sentencizer over the words' tokens, or regex.

``count_sentences`` counts the sentences DataTrove's ``split_into_sentences`` finds in one line,
from each chunk's remembered sentence code (``curate.text.sentence_codes``); ``spacy_sentences``
cuts a text where that sentencizer ends its sentences (C4's ``split_paragraph = false`` only).
"""
from __future__ import annotations

import re

from curate.text.regex_words import regex_sentences
from curate.text.sentence_codes import SENTENCIZER_PUNCT, decode_effect, is_punct
from curate.text.spacy_words import spacy_words

_WS_RUN_RE = re.compile(r"\s+")


def count_sentences(line: str, words: str = "spacy", language: str = "en", chunks: list[str] | None = None) -> int:
    """How many sentences DataTrove's ``split_into_sentences`` finds in ``line`` (stripped, not
    empty): spaCy's sentencizer starts a sentence at the first token that is neither punctuation
    nor an end mark after a token that is an end mark. Whitespace runs other than one space are
    tokens of their own there (neither punctuation nor end marks)."""
    if words == "regex":
        return len(regex_sentences(line))
    if chunks is None:
        chunks = line.split()
    effects = map(decode_effect, spacy_words(language).sentence_codes(chunks).tolist())
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


_CHUNK_RE = re.compile(r"\S+")


def spacy_sentences(text: str, language: str = "en") -> list[str]:
    """DataTrove's ``split_into_sentences``: ``text`` cut after each sentence spaCy's sentencizer
    finds (pieces keep the whitespace between sentences; the last piece runs to the end). Used only
    by C4's ``split_paragraph = false``.

    DataTrove runs spaCy's tokenizer and sentencizer over the whole text, in time quadratic in a run
    of prefix / suffix marks (``"(" * 8000``: 5 s, twice as long: four times that). The sentencizer
    only reads the tokens, so here they are ``SpacyWords``' tokens of each whitespace-separated chunk
    (remembered; a long or mark-heavy chunk tokenized in short pieces, see ``LONG_CHUNK``) and the
    whitespace tokens between chunks, as spaCy's tokenizer makes them: a gap other than one space
    is a token, less a first space (a token's trailing space), the gap before the first chunk
    whole. A sentence starts at the first token that is neither punctuation nor an end mark after
    an end mark (``SENTENCIZER_PUNCT``); each sentence ends where its last token does. Linear in the
    text; the same cuts as spaCy's wherever spaCy tokenizes the chunks alike (all of real prose)."""
    matches = list(_CHUNK_RE.finditer(text))
    if not matches:
        return [text]
    chunks = [m.group() for m in matches]
    sw = spacy_words(language)
    codes = sw.sentence_codes(chunks).tolist()  # per chunk: sentences started, end mark pending after
    cuts: list[int] = []  # where each sentence but the last ends
    seen_end, prev_end = False, 0  # an end mark pending; where the last token ended
    for m, code in zip(matches, codes):
        start = m.start()
        if seen_end and start > prev_end and text[prev_end:start] != " ":
            cuts.append(prev_end)  # a whitespace token starts the sentence
            seen_end = False
        n0, s0, n1, s1 = decode_effect(code)
        if not (n1 if seen_end else n0):  # no sentence starts inside the chunk
            seen_end = s1 if seen_end else s0
            prev_end = m.end()
            continue
        pos = start
        for tok in sw.chunk_tokens([m.group()])[0]:
            if tok in SENTENCIZER_PUNCT:
                seen_end = True
            elif seen_end and not is_punct(tok):
                cuts.append(prev_end)
                seen_end = False
            pos += len(tok)
            prev_end = pos
    if seen_end and len(text) > prev_end and text[prev_end:] != " ":
        cuts.append(prev_end)  # trailing whitespace token: starts a sentence of its own
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
