"""A fastText model file checked before fastText reads it: its header, dictionary and matrix shapes against the
file's size.

fastText's loader trusts the file: a model whose header is valid but whose matrices are smaller than the
header says (cut short, or crafted) is read past its end and the process dies with SIGSEGV, no message. This
module walks the same layout fastText writes (``FastText::saveModel``: magic and version, ``Args``, the
``Dictionary``, the input matrix, dense or product-quantized, then the output matrix) with nothing but
``struct`` over the file's bytes, and refuses a file whose parts do not add up to exactly its size or whose
shapes disagree (the input matrix has ``nwords + bucket`` rows of ``dim`` columns, the output one row per
label or word). A refused file never reaches fastText.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

MAGIC = 793712314
VERSIONS = (11, 12)
KSUB = 256  # centroids per sub-quantizer (fastText's ProductQuantizer)
MAX_WORD_BYTES = 1 << 20
LOSSES = {1: "hs", 2: "ns", 3: "softmax", 4: "ova"}
MODELS = {1: "cbow", 2: "skipgram", 3: "supervised"}


class FastTextFileError(ValueError):
    """The file is not a fastText model fastText could read safely; the message says why."""


@dataclass
class FastTextInfo:
    dim: int
    model: str          # "cbow", "skipgram" or "supervised"
    nwords: int
    labels: list[str]   # with their ``__label__`` prefix, as fastText writes them
    quantized: bool


class _Reader:
    def __init__(self, buf, path: str):
        self.buf, self.pos, self.path = buf, 0, path

    def fail(self, what: str):
        raise FastTextFileError(f"{self.path}: not a valid fastText model ({what}); fastText would crash on it "
                                "or read garbage: use the model file as fastText wrote it")

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            self.fail(f"cut short at byte {self.pos}")
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return out if len(out) > 1 else out[0]

    def skip(self, n: int, what: str):
        if n < 0 or self.pos + n > len(self.buf):
            self.fail(f"{what} needs {n} bytes at byte {self.pos}, the file has {len(self.buf) - self.pos} left")
        self.pos += n

    def word(self) -> bytes:
        end = self.buf.find(b"\0", self.pos, min(len(self.buf), self.pos + MAX_WORD_BYTES))
        if end < 0:
            self.fail(f"a dictionary entry at byte {self.pos} has no end")
        w = self.buf[self.pos:end]
        self.pos = end + 1
        return bytes(w)


def _dense(r: _Reader, what: str) -> tuple[int, int]:
    m, n = r.take("<qq")
    if m < 0 or n < 0:
        r.fail(f"{what} has a negative shape {m} x {n}")
    r.skip(4 * m * n, f"{what} ({m} x {n} floats)")
    return m, n


def _product_quantizer(r: _Reader, what: str) -> int:
    dim, nsubq, dsub, lastdsub = r.take("<iiii")
    if dim <= 0 or nsubq <= 0 or dsub <= 0 or lastdsub <= 0 or (nsubq - 1) * dsub + lastdsub != dim:
        r.fail(f"{what}: product quantizer of dim {dim}, {nsubq} parts of {dsub} (last {lastdsub})")
    r.skip(4 * dim * KSUB, f"{what} centroids")
    return nsubq


def _quantized(r: _Reader, what: str) -> tuple[int, int]:
    qnorm = r.take("<?")
    m, n, codesize = r.take("<qqi")
    if m < 0 or n < 0 or codesize < 0:
        r.fail(f"{what} has a negative size")
    r.skip(codesize, f"{what} codes")
    nsubq = _product_quantizer(r, what)
    if codesize != m * nsubq:
        r.fail(f"{what}: {codesize} code bytes for {m} rows of {nsubq} parts")
    if qnorm:
        r.skip(m, f"{what} norm codes")
        _product_quantizer(r, what + " norms")
    return m, n


def check_fasttext_file(path: str) -> FastTextInfo:
    """The model's shape and labels, or ``FastTextFileError`` saying what is wrong (a regular file is
    required: a device or FIFO is refused before it is read)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"fastText model {path!r} does not exist") from None
    if not os.path.isfile(path):
        raise FastTextFileError(f"{path}: not a regular file")
    if st.st_size < 8:
        raise FastTextFileError(f"{path}: not a fastText model ({st.st_size} bytes)")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _walk(_Reader(buf, path))


def _walk(r: _Reader) -> FastTextInfo:
    magic, version = r.take("<ii")
    if magic != MAGIC:
        r.fail("wrong magic number: not a fastText .bin/.ftz file")
    if version not in VERSIONS:
        r.fail(f"version {version}, fastText writes {VERSIONS[-1]}")
    dim, ws, epoch, min_count, neg, word_ngrams, loss, model, bucket, minn, maxn, lr_update = r.take("<12i")
    r.take("<d")
    if not 0 < dim <= 1 << 16 or bucket < 0 or loss not in LOSSES or model not in MODELS or minn < 0 or maxn < 0:
        r.fail(f"arguments out of range (dim {dim}, bucket {bucket}, loss {loss}, model {model})")
    size, nwords, nlabels, _ntokens, prune_size = r.take("<iiiqq")
    if size < 0 or nwords < 0 or nlabels < 0 or nwords + nlabels != size or prune_size < -1:
        r.fail(f"dictionary of {size} entries for {nwords} words and {nlabels} labels")
    labels = []
    for i in range(size):
        w = r.word()
        _count, kind = r.take("<qb")
        if kind not in (0, 1) or (kind == 1) != (i >= nwords):
            r.fail(f"dictionary entry {i} has type {kind}")
        if kind == 1:
            labels.append(w.decode("utf-8", "replace"))
    if prune_size > 0:
        r.skip(8 * prune_size, "pruned index")
    quant = r.take("<?")
    m_in, n_in = (_quantized if quant else _dense)(r, "input matrix")
    rows_in = (prune_size if prune_size >= 0 else bucket) + nwords
    if n_in != dim or m_in != rows_in:
        r.fail(f"input matrix {m_in} x {n_in}, the header says {rows_in} x {dim}")
    qout = r.take("<?")
    m_out, n_out = (_quantized if quant and qout else _dense)(r, "output matrix")
    want_out = nlabels if MODELS[model] == "supervised" else nwords
    if n_out != dim or m_out != want_out:
        r.fail(f"output matrix {m_out} x {n_out}, the header says {want_out} x {dim}")
    if r.pos != len(r.buf):
        r.fail(f"{len(r.buf) - r.pos} bytes after the output matrix")
    return FastTextInfo(dim, MODELS[model], nwords, labels, quant)
