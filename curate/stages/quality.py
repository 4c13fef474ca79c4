"""``quality_classifier``: score documents with a fastText quality classifier and keep the good ones.

The GPT-3 / MT-NLG recipe: a linear classifier trained to tell curated reference text (the
positives) from raw crawl (the negatives) scores every crawled document; the score decides what is
kept. Train the model with ``curate train-quality`` (``curate/stages/quality_train.py``).

Model. A fastText supervised model with two labels, ``__label__hq`` (high quality, the positives)
and ``__label__lq`` (the negatives). ``label`` names the positive label if a model uses another one
(NeMo Curator's models use ``hq`` vs ``cc``); the model must have it. Text goes through
``prepare_text`` (lowercase, punctuation split off, one line) both for training and scoring.

Column ``quality_score``: the model's probability of the positive label.

Keeping:
- ``pareto_alpha = 0`` (default): keep when ``quality_score >= threshold`` (0.5).
- ``pareto_alpha > 0``: GPT-3's Pareto sampling: keep when ``X > 1 - quality_score`` where ``X`` is
  a draw of ``numpy.random.pareto(pareto_alpha)`` (Lomax). GPT-3 used alpha = 9; NeMo Curator's
  ``FastTextQualityFilter`` uses 3. Mostly keeps high scores, sometimes keeps low ones. Each
  document's draw comes from ``seed`` and its ``id`` alone (``X = U**(-1/alpha) - 1`` with ``U`` in
  (0, 1] from a BLAKE2b hash of seed and id: the same distribution as numpy's), so a run repeats
  exactly whatever the shard order, batch split or worker count.
- ``tag_only = true``: add the score, drop nothing.

Reason: ``low_quality``.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from curate.schema import ID, TEXT
from curate.stage_watch import at_batch
from curate.stages.base import MapStage, StageResult, set_column, split
from curate.text.fasttext_file import FastTextFileError
from curate.text.fasttext_model import LABEL_PREFIX, load_fasttext_model, model_labels

QUALITY_SCORE = "quality_score"
POSITIVE, NEGATIVE = "hq", "lq"
REASONS = {"low_quality": "quality_score below threshold, or not chosen by Pareto sampling"}

_PUNCT_RE = re.compile(r"([^\w\s])")
_SPACE_RE = re.compile(r"\s+")
# a word fastText reads as a label: one that begins with the prefix, at the start of the text or after one of
# the bytes fastText splits words on (``Dictionary::readWord``: space, \n, \r, \t, \v, \f, \0)
_LABEL_WORD_RE = re.compile(r"(?<![^ \n\r\t\v\f\x00])" + re.escape(LABEL_PREFIX))


def neutralise_labels(text: str) -> str:
    """``text`` with every word that fastText would read as a label (``__label__...``) made an ordinary word
    (one leading underscore less: ``__label__hq`` -> ``_label__hq``). Idempotent."""
    return _LABEL_WORD_RE.sub(LABEL_PREFIX[1:], text)


def prepare_text(text: str) -> str:
    """What the classifier sees: lowercased, punctuation as separate tokens, one line; a word beginning with
    ``__label__`` loses one leading underscore (fastText would read it as a label: a label added to a training
    line, a word dropped when scoring), as ``curate train-quality`` trains on."""
    text = _SPACE_RE.sub(" ", _PUNCT_RE.sub(r" \1 ", text.lower())).strip()
    return neutralise_labels(text)


def uniform_from_id(seed: int, doc_id: str) -> float:
    """A number in (0, 1] fixed by ``seed`` and the document id alone."""
    h = hashlib.blake2b(f"{seed}\x00{doc_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return (int.from_bytes(h, "little") + 1) / 2.0**64


def pareto_draws(seed: int, ids: list[str], alpha: float) -> np.ndarray:
    """One Lomax(alpha) draw per document (``numpy.random.pareto``'s distribution), by inversion."""
    u = np.fromiter((uniform_from_id(seed, i) for i in ids), dtype=np.float64, count=len(ids))
    return u ** (-1.0 / alpha) - 1.0


@dataclass
class Params:
    model: str = ""            # path of the fastText model (curate train-quality writes one)
    threshold: float = 0.5     # keep when quality_score >= threshold (pareto_alpha = 0)
    pareto_alpha: float = 0.0  # > 0: GPT-3 Pareto sampling (GPT-3 used 9, NeMo Curator 3)
    seed: int = 0              # with the document id, fixes each Pareto draw
    label: str = POSITIVE      # the model's positive label, without __label__
    tag_only: bool = False     # add quality_score, drop nothing
    batch_size: int = 1024     # documents per predict call

    def __post_init__(self):
        if not self.model:
            raise ValueError("model is missing: the path of a fastText quality model (see `curate train-quality`)")
        if not os.path.isfile(self.model):
            raise ValueError(f"model = {self.model!r}: no such file")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold = {self.threshold!r}: must be between 0 and 1")
        if self.pareto_alpha < 0:
            raise ValueError(f"pareto_alpha = {self.pareto_alpha!r}: must be > 0 (or 0 for threshold mode)")
        if self.batch_size < 1:
            raise ValueError(f"batch_size = {self.batch_size!r}: must be >= 1")
        try:
            labels = model_labels(self.model)
        except FastTextFileError as e:
            raise ValueError(f"model = {self.model!r}: {e}") from None
        if self.label not in labels:
            raise ValueError(f"label = {self.label!r}: the model {self.model} has no such label; its labels: "
                             f"{', '.join(labels[:8])}")


class QualityClassifier(MapStage):
    Params = Params
    REASONS = REASONS

    def _model(self):
        model = load_fasttext_model(self.params.model)
        label = LABEL_PREFIX + self.params.label
        if label not in model.get_labels():
            raise ValueError(f"{self.name}: model {self.params.model!r} has no label {label!r}; "
                             f"its labels: {', '.join(model.get_labels())}")
        return model

    def warm(self) -> None:
        """Load the model now: the watched child processes of the chain inherit it."""
        self._model()

    def score(self, texts: list[str]) -> np.ndarray:
        """Probability of the positive label for each text."""
        model = self._model()
        label = LABEL_PREFIX + self.params.label
        out = np.zeros(len(texts), dtype=np.float64)
        step = self.params.batch_size
        for start in range(0, len(texts), step):
            at_batch(len(texts[start:start + step]))  # the per-document time limit: this many at once
            labels, probs = model.predict([prepare_text(t) for t in texts[start:start + step]], k=-1)
            for i, (labs, prs) in enumerate(zip(labels, probs)):
                for lab, pr in zip(labs, prs):
                    if lab == label:
                        out[start + i] = min(max(float(pr), 0.0), 1.0)
                        break
        return out

    def apply(self, table: pa.Table, context=None) -> StageResult:
        p = self.params
        scores = self.score(table.column(TEXT).to_pylist())
        table = set_column(table, QUALITY_SCORE, pa.array(scores, pa.float64()))
        if p.tag_only:
            keep = np.ones(len(scores), dtype=bool)
        elif p.pareto_alpha > 0:
            keep = pareto_draws(p.seed, table.column(ID).to_pylist(), p.pareto_alpha) > 1.0 - scores
        else:
            keep = scores >= p.threshold
        return split(table, self.name, [None if k else "low_quality" for k in keep.tolist()])
