"""Blocks that are a page's interface, not its text, told by their words: rules on the classifier's output.

- **Labels** (``interface_labels``): a short block made only of an advertisement label ("Advertisement",
  "Anzeige", "Publicité", "广告", "إعلان", ...) or of action words ("Quote Reply Report", "Share", "1 Like",
  "Antworten", "回复 引用 举报", ...), with counts and a few words that go with them ("Story continues below
  advertisement", "Gefällt mir"). The classifier reads a block's shape and place, not its words: on a page of
  short paragraphs such a label looks like one: of both gold sets' blocks it kept 123 advertisement labels and
  174 action lines (cross-validated), of which the gold text holds 4. Headings, list items, definition terms
  and table cells are left as they are: there "Advertising" or "Edit" is the name of a topic.
- **Script notices** (``script_notices``): a ``noscript`` element's "Please enable JavaScript ..." (a run of
  ``noscript`` blocks of at most ``NOTICE_WORDS`` words that names JavaScript), or a short one that begins
  with markup written as text (a tracking pixel's ``<img ...>``). Never content: none of both
  gold sets' 40-odd such notices is in the gold text; a ``noscript`` that holds the page's text (a forum's
  crawler view) is longer.
- **Loading placeholders** (``LOADING``): "Loading...", "Loading recommendations", "Chargement...", "加载中",
  which script replaces with content once the page has loaded. The classifier kept 278 of them on both gold
  sets (cross-validated), 4 of which are in the gold text.
"""
from __future__ import annotations

import re

import numpy as np

# an advertisement's label, in the languages of the web's larger sites
AD_LABELS = frozenset("""
advertisement advertisements advert adverts ad ads sponsored promoted anzeige anzeigen werbung gesponsert
reklame reklama reklam publicité publicite sponsorisé sponsorise annonce publicidad anuncio anuncios patrocinado
publicidade pubblicità pubblicita sponsorizzato advertentie gesponsord annons annonse mainos
реклама διαφήμιση 广告 廣告 広告 광고 إعلان اعلان إعلانات פרסומת विज्ञापन โฆษณา iklan quảng
""".split())
# what a post or a comment lets a reader do
ACTIONS = frozenset("""
reply replies quote report share shares like likes edit delete flag permalink upvote downvote bookmark
antworten zitieren melden teilen bearbeiten löschen répondre repondre citer signaler partager modifier supprimer
gefällt aime responder citar reportar denunciar compartir editar gusta rispondi cita segnala condividi modifica piace
compartilhar curtir reageren citeren delen ответить цитировать цитата пожаловаться поделиться нравится
回复 回覆 引用 举报 舉報 分享 点赞 赞 返信 通報 共有 いいね 답글 인용 신고 공유 좋아요 رد اقتباس إبلاغ مشاركة إعجاب
""".split())
# words that go with those ("Story continues below advertisement", "Sponsored content", "Gefällt mir",
# "Me gusta", "J'aime", "Reply to this post", "quảng cáo")
GLUE = frozenset("""
continue continues continued scroll to reading story article below content by this post comment me mi mir
j cáo
""".split())
# a placeholder that script replaces with content once the page has loaded ("Loading...", "Please wait",
# "Loading recommendations", "Chargement...", "Wird geladen", "加载中"): the first of at most ``LOADING_WORDS``
LOADING = frozenset("""
loading chargement cargando carregando caricamento laden geladen lädt ładowanie načítání načítavam yükleniyor
laddar indlæser lastes ladataan betöltés загрузка завантаження φόρτωση טוען جار تحميل 加载中 載入中 加载 載入
読み込み中 読込中 로딩 불러오는
""".split())
LOADING_WORDS = 3
_VOCAB = AD_LABELS | ACTIONS
_FIRST = _VOCAB | GLUE | frozenset(map(str, range(1000)))  # what an ASCII label's first word can be
_LONGEST = max(map(len, _VOCAB | GLUE))
LABEL_CHARS = 60   # blocks longer than this are never a label
LABEL_WORDS = 6    # ... nor those of more words
# the blocks where a label word names a topic: headings, list items, definition lists, table cells, code
SPARED_TAGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "td", "th", "pre", "caption"))
# white space and punctuation (not \W: a letter's combining marks, as in Devanagari, are \W for ``re``)
_SPLIT = re.compile(r"[\s!-/:-@\[-`{-~\u00a1-\u00bf\u2000-\u206f\u3000-\u303f\u060c\u061b\u061f\u30fb\uff01-\uff0f"
                    r"\uff1a-\uff20\uff5c]+")


def is_label(text: str) -> bool:
    """Whether ``text`` is only an advertisement label or action words (``AD_LABELS``, ``ACTIONS``), with
    counts of up to three digits and ``GLUE`` words: at most ``LABEL_WORDS`` words. A script written without
    spaces runs its words together ("回复引用举报"): such a word is read as a run of the listed words."""
    return len(text) <= LABEL_CHARS and _label_words(_SPLIT.sub(" ", text.lower()).split())


def _loading(words: list[str]) -> bool:
    """Whether ``words`` (a block's, lower case) are a loading placeholder: at most ``LOADING_WORDS`` words, the
    first (or, for "Wird geladen" and "Please wait", the second) a word of ``LOADING``."""
    if not words or len(words) > LOADING_WORDS:
        return False
    return (words[0] in LOADING or words[:2] == ["please", "wait"]
            or (len(words) > 1 and words[1] in LOADING and words[0] in ("wird", "wordt", "se", "is")))


def _label_words(words: list[str]) -> bool:
    if not words or len(words) > LABEL_WORDS:
        return False
    label = False
    for w in words:
        if w in _VOCAB:
            label = True
        elif w in GLUE or (w.isdigit() and len(w) <= 3):
            continue
        else:
            found = _run_of_labels(w)
            if found is None:
                return False
            label |= found
    return label


def _run_of_labels(w: str) -> bool | None:
    """``w`` read as listed words written without spaces (greedy, longest first): whether one of them is a
    label word; None when it is not such a run."""
    if w.isascii():
        return None
    i = 0
    label = False
    while i < len(w):
        for k in range(min(_LONGEST, len(w) - i), 0, -1):
            part = w[i:i + k]
            if part in _VOCAB or part in GLUE:
                label |= part in _VOCAB
                i += k
                break
        else:
            return None
    return label


def interface_labels(texts: list[str], tags: list[str], prob, threshold: float, size=None) -> np.ndarray:
    """``prob`` with the kept blocks that are labels (``is_label``) set to 0, outside ``SPARED_TAGS``.
    ``size``: each block's characters, when the caller has them."""
    prob = np.asarray(prob, dtype=np.float32)
    if size is None:
        size = np.fromiter(map(len, texts), dtype=np.float64, count=len(texts))
    short = size <= LABEL_CHARS
    cand = [i for i in np.flatnonzero(short & (prob >= threshold)).tolist() if tags[i] not in SPARED_TAGS]
    if not cand:
        return prob
    # one pass of the splitting expression over the page's candidates (a block never holds a NUL)
    lines = _SPLIT.sub(" ", "\x00".join([texts[i] for i in cand]).lower()).split("\x00")
    drop = [i for i, words in zip(cand, map(str.split, lines))  # most fail at their first word, here
            if words and ((words[0] in _FIRST or not words[0].isascii()) and _label_words(words)
                          or _loading(words))]
    if not drop:
        return prob
    prob = prob.copy()
    prob[drop] = 0.0
    return prob


_NOTICE = re.compile(r"javascript|java script|جافا ?سكريبت|ジャバスクリプト", re.IGNORECASE)
_MARKUP = re.compile(r"\s*<[a-zA-Z][^>]*>")  # a text that begins with a tag: markup written as text
NOTICE_WORDS = 60  # a noscript's text of at most this many words that names JavaScript is a notice
_WORD = re.compile(r"\w+")


def noscript_runs(noscript) -> list[tuple[int, int]]:
    """(first, end) of each run of consecutive blocks inside a ``noscript`` element (one element, or several
    side by side)."""
    ns = np.asarray(noscript, dtype=bool)
    if not ns.any():
        return []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ns.view(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def script_notices(texts: list[str], noscript) -> np.ndarray:
    """Per block, whether it belongs to a ``noscript`` notice: a run of ``noscript`` blocks (``noscript_runs``)
    of at most ``NOTICE_WORDS`` words that names JavaScript or begins with a tag written as text."""
    out = np.zeros(len(texts), dtype=bool)
    for a, b in noscript_runs(noscript):
        run = texts[a:b]
        if (_MARKUP.match(run[0]) or any(_NOTICE.search(t) for t in run)) \
                and sum(len(_WORD.findall(t)) for t in run) <= NOTICE_WORDS:
            out[a:b] = True
    return out
