"""fastText models, loaded once per process: the model itself and its fast predictor.

``langid`` and ``quality_classifier`` (and ``curate train-quality``'s checks) load their models
here. A model is keyed by its real path, size and modification time, so a file rewritten in place
(a new ``curate train-quality`` run) is loaded again. Every file is checked first
(``fasttext_file.check_fasttext_file``: header, dictionary and matrix sizes against the file's size): fastText
itself would crash the process on a file whose matrices are smaller than its header says.
"""
from __future__ import annotations

import os
import threading

LABEL_PREFIX = "__label__"

_MODELS: dict[tuple, object] = {}
_FAST: dict[tuple, object] = {}  # model key -> FastPredictor, or None where fastText is used
_LOCK = threading.Lock()


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

                from curate.text.fasttext_file import check_fasttext_file

                check_fasttext_file(real)  # raises FastTextFileError (a ValueError) with what is wrong
                for old in [k for k in _MODELS if k[0] == real]:
                    del _MODELS[old]
                model = _MODELS[key] = _FastText(model_path=real)
    return model


def model_labels(path: str) -> list[str]:
    """The labels of the model at ``path`` without their ``__label__`` prefix, read from the checked file
    (fastText is not loaded)."""
    from curate.text.fasttext_file import check_fasttext_file

    return [w[len(LABEL_PREFIX):] if w.startswith(LABEL_PREFIX) else w for w in check_fasttext_file(path).labels]


def fast_predictor(path: str):
    """The ``FastPredictor`` of the model at ``path`` (one per process), or None for models it does
    not cover."""
    key = _model_key(path)
    if key not in _FAST:
        from curate.text.fasttext_predict import FastPredictor

        model = load_fasttext_model(path)
        with _LOCK:
            if key not in _FAST:
                for old in [k for k in _FAST if k[0] == key[0]]:
                    del _FAST[old]
                _FAST[key] = FastPredictor.build(model, key[0])
    return _FAST[key]

