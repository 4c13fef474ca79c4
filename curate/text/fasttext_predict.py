"""fastText's ``predict(text, k=1)`` for a supervised hierarchical-softmax model, bit for bit, faster.

fastText spends almost all of its prediction time hashing every character n-gram of every word,
although natural text repeats its words: here each distinct word's input rows are computed once per
process (the steps are in ``FastPredictor``'s doc). ``FastPredictor.build`` returns None for a model
it does not cover (other losses, word n-grams, a quantized output, a file it does not recognise) and
the caller uses fastText itself. ``tests/test_langid.py`` checks label and probability (as floats,
exactly) against fastText on real documents of many languages and on random text.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import re
import struct
from itertools import chain
from pathlib import Path

import numba as nb
import numpy as np

F32 = np.float32
_SEPARATORS = " \t\n\v\f\r\x00"  # fastText's Dictionary::readWord
_SEPARATORS_RE = re.compile(f"[^{_SEPARATORS}]+")
# characters that str.split() cuts at and fastText does not, and NUL (the other way round): where a
# text has none, str.split() gives fastText's words (tests/test_langid.py derives the set again)
OTHER_SPACES = ("\x00\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_OTHER_SPACES_RE = re.compile(f"[{OTHER_SPACES}]")
EOS = "</s>"
MEMO_SIZE = 1_000_000  # words whose input rows are remembered; emptied when full

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_expf = _libm.expf
_expf.restype = ctypes.c_float
_expf.argtypes = [ctypes.c_float]

SELF_CHECK = [
    "", "The quick brown fox jumps over the lazy dog.", "Der schnelle braune Fuchs springt über den Hund.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.", "敏捷的棕色狐狸跳过了懒狗。", "42 1,000 ... !!",
    "une phrase </s> puis la suite", "__label__en word __label__xx", "x\x00y\tz\vq\fr",
]


def _std_log(x: float) -> np.float32:
    """fastText's ``std_log(real x) = std::log(x + 1e-5)`` (x rounded to float32, the log in double)."""
    return F32(math.log(float(F32(x)) + 1e-5))


class FastPredictor:
    """``model.predict(text, k=1)`` for one text at a time, exactly, in four steps:

    1. the line is cut into words at fastText's separators (space, tab, ``\\n``, ``\\v``, ``\\f``,
       ``\\r``, NUL), an end-of-sentence token ``</s>`` is added (fastText reads ``text + "\\n"``);
       a ``</s>`` in the text ends the line there, tokens starting with the label prefix are skipped,
       as in fastText's ``Dictionary::getLine``;
    2. each word's input rows (the word itself when in the dictionary, then its character n-grams,
       FNV-1a hashed modulo ``bucket`` and mapped through the pruning table of a quantized model) are
       computed as fastText's ``Dictionary::computeSubwords`` does, for all new words of a text in one
       numba call, from the dictionary read out of the model file; they are remembered per word
       (``MEMO_SIZE`` words) and equal ``model.get_subwords(word)[1]``;
    3. the hidden vector is the float32 sum of those rows in the same order (each row is what the
       model's ``get_input_vector`` returns: the dequantized row, computed as fastText's ``addRow``
       does; all rows are fetched once at start), times ``float32(1 / count)``;
    4. the tree search of ``HierarchicalSoftmaxLoss::predict`` with k = 1: node scores from float32
       dot products summed in order, ``1 / (1 + expf(-f))``, ``log(x + 1e-5)`` in double rounded to
       float32, and ``expf`` of the best leaf's score, with the C library's ``expf``.

    The output matrix of a quantized model (``.ftz``) is not reachable through fastText's Python
    API, so it is read from the end of the file (a dense ``nlabels x dim`` float32 matrix, as
    fastText writes it when the output is not quantized). ``build`` compares the predictor with
    fastText on sample text before it is used."""

    def __init__(self, model, dictionary: "ModelDictionary", inputs: np.ndarray, output: np.ndarray):
        self._model = model
        self._dict = dictionary
        args = model.f.getArgs()
        self._label = args.label
        self._minn, self._maxn, self._bucket = args.minn, args.maxn, args.bucket
        self._prune = dictionary.prune_table(args.bucket)
        labels, counts = model.get_labels(include_freq=True)
        self._labels = list(labels)
        self._osz = len(labels)
        self._out = np.ascontiguousarray(output[:self._osz - 1], dtype=F32)  # rows of the inner nodes
        self._left, self._right = (np.array(x, dtype=np.int64) for x in _huffman_tree([int(c) for c in counts]))
        self._log_threshold = _std_log(0.0)
        self._dim = args.dim
        self._matrix = inputs
        self.reset_words()

    @classmethod
    def build(cls, model, path: str) -> "FastPredictor | None":
        """A predictor for ``model`` (loaded from ``path``), or None where this module does not
        reproduce fastText (then use ``model.predict``)."""
        try:
            args = model.f.getArgs()
            if (args.model.name != "supervised" or args.loss.name != "hs" or args.wordNgrams > 1
                    or args.maxn <= 0):
                return None
            dictionary = ModelDictionary.read(path)
            if (dictionary is None or dictionary.words != list(model.get_words())
                    or dictionary.labels != list(model.get_labels())):
                return None
            output = _output_matrix(model, path, len(dictionary.labels), args.dim)
            if output is None:
                return None
            if model.f.isQuant():
                if dictionary.prune_size < 0:  # a quantized model that was not pruned: too many rows
                    return None
                rows = len(dictionary.words) + dictionary.prune_size
                inputs = np.stack([model.get_input_vector(i) for i in range(rows)]).astype(F32)
            else:
                inputs = np.ascontiguousarray(model.get_input_matrix(), dtype=F32)
            pred = cls(model, dictionary, inputs, output)
            for text in SELF_CHECK:
                if pred.predict_one(text) != _reference(model, text):
                    return None
            return pred
        except Exception:  # noqa: BLE001 - anything unexpected: fastText itself is used
            return None

    def subword_table(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """fastText's input rows of each word (``model.get_subwords(word)[1]``: the word's own id
        when it is in the dictionary, then its hashed character n-grams), computed in one call, as
        (ids of all words one after the other, where each word starts; one more at the end)."""
        d = self._dict
        encoded = [("<" + w + ">").encode("utf-8") for w in words]  # a lone surrogate raises here
        offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        get = d.word_id.get
        own = np.fromiter((get(w, -1) for w in words), dtype=np.int64, count=len(words))
        is_eos = np.fromiter((w == EOS for w in words), dtype=np.bool_, count=len(words))
        return _subword_ids(data, offsets, own, is_eos, self._minn, self._maxn, self._bucket,
                            d.prune_size, self._prune, len(d.words))

    def subword_ids(self, words: list[str]) -> list[list[int]]:
        flat, starts = self.subword_table(words)
        flat, starts = flat.tolist(), starts.tolist()
        return [flat[starts[i]:starts[i + 1]] for i in range(len(words))]

    def _learn(self, words: list[str]) -> None:
        """Add the input rows of ``words`` (not seen yet, distinct) to the word tables."""
        flat, starts = self.subword_table(words)
        n = len(flat)
        w, at = self._n_words, self._n_flat
        while w + len(words) > len(self._starts):
            self._starts = np.concatenate([self._starts, self._starts])
            self._lens = np.concatenate([self._lens, self._lens])
        while at + n > len(self._flat):
            self._flat = np.concatenate([self._flat, self._flat])
        self._lens[w:w + len(words)] = np.diff(starts)
        self._starts[w:w + len(words)] = at + starts[:-1]
        self._flat[at:at + n] = flat
        self._word_index.update(zip(words, range(w, w + len(words))))
        self._n_words, self._n_flat = w + len(words), at + n

    def reset_words(self) -> None:
        self._word_index: dict[str, int] = {}
        self._starts = np.zeros(4096, dtype=np.int64)
        self._lens = np.zeros(4096, dtype=np.int64)
        self._flat = np.zeros(16384, dtype=np.int64)
        self._n_words = self._n_flat = 0
        self._learn([EOS])
        self._eos = self._word_index[EOS]

    def words(self, text: str) -> list[str]:
        """fastText's words of ``text``, up to its first ``</s>``, labels left out."""
        return self.split_words(text)[0]

    def split_words(self, text: str) -> tuple[list[str], bool]:
        """(``words(text)``, whether they are ``text.split()``). ``\n`` and ``\r`` separate words
        for fastText too, so a text's words are those of the one line ``predict`` is given."""
        if _OTHER_SPACES_RE.search(text):
            words, plain = _SEPARATORS_RE.findall(text), False
        else:
            words, plain = text.split(), True
        if EOS in text and EOS in words:
            words, plain = words[:words.index(EOS)], False
        if self._label in text:
            words, plain = [w for w in words if not w.startswith(self._label)], False
        return words, plain

    def hidden(self, text: str) -> np.ndarray:
        return hidden_vector(self.word_ids(text), self._starts, self._lens, self._flat, self._matrix)

    def word_ids(self, text: str) -> np.ndarray:
        """The indices of the words of ``text`` (then ``</s>``) in the word tables."""
        words = self.words(text)
        self._ensure([words])
        ids = list(map(self._word_index.__getitem__, words))
        ids.append(self._eos)
        return np.array(ids, dtype=np.int64)

    def predict(self, lines: list[str], word_lists: list[list[str]] | None = None, ids_out: list | None = None
                ) -> tuple[list[list[str]], list[list[float]]]:
        """``model.predict(lines, k=1)``'s (labels, probabilities), as lists. A line this class
        does not handle (a lone surrogate) goes to fastText, which raises as it always does.
        ``word_lists``: ``words(line)`` of each line, where the caller has them. ``ids_out``: a
        list that gets (word index, its ids of every line's words then ``</s>``, each line's end)."""
        try:
            if word_lists is None:
                word_lists = [self.words(line) for line in lines]
            self._ensure(word_lists)
        except Exception:  # noqa: BLE001 - line by line, fastText's own answer or error where needed
            return self._predict_each(lines)
        index, eos = self._word_index, self._eos
        flat: list[int] = []
        ends = np.empty(len(lines), dtype=np.int64)
        for i, words in enumerate(word_lists):
            flat.extend(map(index.__getitem__, words))
            flat.append(eos)
            ends[i] = len(flat)
        flat = np.array(flat, dtype=np.int64)
        if ids_out is not None:
            ids_out.append((index, flat, ends))
        nodes, scores = top_leaves(flat, ends, self._starts, self._lens, self._flat,
                                   self._matrix, self._out, self._left, self._right, self._osz,
                                   self._log_threshold)
        labels, probs = [], []
        for node, score in zip(nodes.tolist(), scores.tolist()):
            labels.append([self._labels[node]] if node >= 0 else [])
            probs.append([float(F32(_expf(score)))] if node >= 0 else [])
        return labels, probs

    def _predict_each(self, lines: list[str]) -> tuple[list[list[str]], list[list[float]]]:
        labels, probs = [], []
        for line in lines:
            try:
                lab, pr = self.predict_one(line)
            except Exception:  # noqa: BLE001 - fastText's own answer or error
                lab, pr = _reference(self._model, line)
            labels.append([lab] if lab else [])
            probs.append([pr] if lab else [])
        return labels, probs

    def _ensure(self, word_lists: list[list[str]]) -> None:
        """Every word of ``word_lists`` in the word tables (emptied first when they would hold more
        than ``MEMO_SIZE`` words)."""
        # the distinct new words, in C (the order words are added in does not change a result)
        new = set(chain.from_iterable(word_lists)).difference(self._word_index)
        if new:
            if self._n_words + len(new) >= MEMO_SIZE:
                self.reset_words()
                new = set(chain.from_iterable(word_lists)).difference(self._word_index)
            self._learn(list(new))

    def predict_one(self, text: str) -> tuple[str, float]:
        """(label as the model writes it, probability) of the top label."""
        node, score = top_leaf(self.word_ids(text), self._starts, self._lens, self._flat, self._matrix,
                               self._out, self._left, self._right, self._osz, self._log_threshold)
        if node < 0:
            return "", 0.0
        return self._labels[node], float(F32(_expf(score)))


def _reference(model, text: str) -> tuple[str, float]:
    labels, probs = model.predict([text], k=1)
    return (labels[0][0], float(probs[0][0])) if labels[0] else ("", 0.0)


def _huffman_tree(counts: list[int]) -> tuple[list[int], list[int]]:
    """Children of each node of fastText's ``HierarchicalSoftmaxLoss::buildTree`` (labels sorted by
    count, most frequent first, as the dictionary keeps them)."""
    osz = len(counts)
    count = counts + [10**15] * (osz - 1)
    left, right = [-1] * (2 * osz - 1), [-1] * (2 * osz - 1)
    leaf, node = osz - 1, osz
    for i in range(osz, 2 * osz - 1):
        mini = [0, 0]
        for j in range(2):
            if leaf >= 0 and count[leaf] < count[node]:
                mini[j] = leaf
                leaf -= 1
            else:
                mini[j] = node
                node += 1
        left[i], right[i] = mini
        count[i] = count[mini[0]] + count[mini[1]]
    return left, right


class ModelDictionary:
    """The dictionary part of a fastText model file, read as fastText's ``Dictionary::load`` does."""

    MAGIC, VERSION = 793712314, 12

    def __init__(self, words, labels, prune_size, prune):
        self.words, self.labels, self.prune_size = words, labels, prune_size
        self.word_id = {w: i for i, w in enumerate(words)}
        self.prune = prune  # (n-gram hash, its row among the n-gram rows)

    def prune_table(self, bucket: int) -> np.ndarray:
        """Row of each n-gram hash (0 <= hash < bucket), -1 where pruned away."""
        table = np.full(bucket if self.prune_size > 0 else 0, -1, dtype=np.int32)
        if len(self.prune):
            table[self.prune[:, 0]] = self.prune[:, 1]
        return table

    @classmethod
    def read(cls, path: str) -> "ModelDictionary | None":
        with open(path, "rb") as f:
            head = f.read(92)
            if len(head) < 92 or struct.unpack("<ii", head[:8]) != (cls.MAGIC, cls.VERSION):
                return None
            size, nwords, nlabels, _, prune_size = struct.unpack("<iiiqq", head[64:92])
            words, labels = [], []
            buf = f.read(1 << 20)
            pos = 0
            for _ in range(size):
                while True:
                    end = buf.find(b"\0", pos)
                    if end >= 0 and end + 10 <= len(buf):
                        break
                    more = f.read(1 << 20)
                    if not more:
                        return None
                    buf, pos = buf[pos:] + more, 0
                word = buf[pos:end].decode("utf-8", "surrogateescape")
                kind = buf[end + 9]
                (words if kind == 0 else labels).append(word)
                pos = end + 10
            if len(words) != nwords or len(labels) != nlabels:
                return None
            need = 8 * max(prune_size, 0)
            rest = buf[pos:] + f.read(max(0, need - (len(buf) - pos)))
            prune = np.frombuffer(rest[:need], dtype="<i4").reshape(-1, 2).astype(np.int64)
        return cls(words, labels, prune_size, prune)


@nb.njit(cache=True)
def _subword_ids(data, offsets, own, is_eos, minn, maxn, bucket, prune_size, prune, nwords):
    """fastText's ``Dictionary::getSubwords`` for many words: ``data[offsets[i]:offsets[i + 1]]`` is
    ``"<" + word + ">"`` in UTF-8; returns the ids of all words one after the other and where each
    word's start (the FNV-1a hash of each n-gram of code points, bytes sign-extended as fastText's
    ``int8_t``, modulo ``bucket``, through the pruning table ``prune``: hash -> row or -1)."""
    nw = len(offsets) - 1
    out = np.empty(len(data) * maxn + nw, dtype=np.int64)
    starts = np.zeros(nw + 1, dtype=np.int64)
    k = 0
    for wi in range(nw):
        starts[wi] = k
        if own[wi] >= 0:
            out[k] = own[wi]
            k += 1
        if is_eos[wi]:  # fastText's end-of-sentence token has no n-grams
            continue
        s, e = offsets[wi], offsets[wi + 1]
        for i in range(s, e):
            if (data[i] & 0xC0) == 0x80:
                continue
            h = np.uint32(2166136261)
            j = i
            n = 1
            while j < e and n <= maxn:
                b = np.int64(data[j])
                if b >= 128:
                    b -= 256
                h = np.uint32((np.int64(h) ^ (b & 0xFFFFFFFF)) * 16777619 & 0xFFFFFFFF)
                j += 1
                while j < e and (data[j] & 0xC0) == 0x80:
                    b = np.int64(data[j]) - 256
                    h = np.uint32((np.int64(h) ^ (b & 0xFFFFFFFF)) * 16777619 & 0xFFFFFFFF)
                    j += 1
                if n >= minn and not (n == 1 and (i == s or j == e)):
                    hid = np.int64(h) % bucket
                    if prune_size < 0:
                        out[k] = nwords + hid
                        k += 1
                    elif prune_size > 0:
                        row = prune[hid]
                        if row >= 0:
                            out[k] = nwords + row
                            k += 1
                n += 1
    starts[nw] = k
    return out[:k], starts


def _output_matrix(model, path: str, nlabels: int, dim: int) -> np.ndarray | None:
    if not model.f.isQuant():
        return np.asarray(model.get_output_matrix(), dtype=F32)
    size = nlabels * dim * 4
    with open(Path(path), "rb") as f:
        f.seek(0, 2)
        end = f.tell()
        if end < size + 17:
            return None
        f.seek(end - size - 17)
        tail = f.read()
    qout, rows, cols = tail[0], *struct.unpack("<qq", tail[1:17])
    if qout != 0 or rows != nlabels or cols != dim:
        return None
    return np.frombuffer(tail[17:], dtype="<f4").reshape(nlabels, dim).astype(F32)


@nb.njit(cache=True)
def hidden_vector(ids, starts, lens, flat, matrix):
    """fastText's ``computeHidden``: the input rows of the words ``ids`` summed in order in float32,
    times ``float32(1 / count)`` (no reordering: numba keeps IEEE float32 semantics)."""
    dim = matrix.shape[1]
    h = np.zeros(dim, dtype=np.float32)
    n = 0
    for w in ids:
        s = starts[w]
        for k in range(s, s + lens[w]):
            r = flat[k]
            for j in range(dim):
                h[j] += matrix[r, j]
        n += lens[w]
    scale = np.float32(1.0 / n)
    for j in range(dim):
        h[j] *= scale
    return h


@nb.njit(cache=True)
def top_leaves(flat, ends, starts, lens, table, matrix, out, left, right, osz, log_threshold):
    """``top_leaf`` of each text: the word ids of text i are ``flat[ends[i - 1]:ends[i]]``."""
    nodes = np.empty(len(ends), dtype=np.int64)
    scores = np.empty(len(ends), dtype=np.float32)
    a = 0
    for i in range(len(ends)):
        nodes[i], scores[i] = top_leaf(flat[a:ends[i]], starts, lens, table, matrix, out, left, right, osz,
                                       log_threshold)
        a = ends[i]
    return nodes, scores


@nb.njit(cache=True)
def top_leaf(ids, starts, lens, flat, matrix, out, left, right, osz, log_threshold):
    """fastText's ``HierarchicalSoftmaxLoss::predict`` with k = 1 over the hidden vector of the
    words ``ids``: (best leaf, its log score). Its recursive dfs, left child first, in float32 as
    fastText computes it: ``f = 1 / (1 + expf(-dot))`` (the division in double), children scored
    ``score + float32(log(float32(1 - f) + 1e-5))`` and ``score + float32(log(f + 1e-5))``."""
    h = hidden_vector(ids, starts, lens, flat, matrix)
    dim = matrix.shape[1]
    stack_node = np.empty(4 * osz, dtype=np.int64)
    stack_score = np.empty(4 * osz, dtype=np.float32)
    top = 0
    stack_node[0] = 2 * osz - 2
    stack_score[0] = np.float32(0.0)
    top = 1
    best_node = -1
    best_score = np.float32(0.0)
    while top > 0:
        top -= 1
        node = stack_node[top]
        score = stack_score[top]
        if score < log_threshold:
            continue
        if best_node >= 0 and score < best_score:
            continue
        if left[node] == -1 and right[node] == -1:
            best_node = node  # score >= best: a later leaf wins a tie, as with fastText's heap
            best_score = score
            continue
        row = node - osz
        d = np.float32(0.0)
        for j in range(dim):
            d += out[row, j] * h[j]
        f = np.float32(1.0 / np.float64(np.float32(1.0) + np.exp(-d)))
        stack_node[top] = right[node]
        stack_score[top] = score + np.float32(np.log(np.float64(f) + 1e-5))
        stack_node[top + 1] = left[node]
        stack_score[top + 1] = score + np.float32(np.log(np.float64(np.float32(1.0 - np.float64(f))) + 1e-5))
        top += 2
    return best_node, best_score
