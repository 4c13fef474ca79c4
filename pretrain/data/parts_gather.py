"""Copy GPT samples out of the token files: the one gather behind ``GPTDataset[i]`` and ``get_batch``.

Which tokens sample ``i`` holds is decided by the three index arrays of :mod:`pretrain.data.gpt_dataset`:

    i --shuffle--> j --sample index rows j, j + 1--> (document-index position, offset) where the sample starts
    and where it ends --document index--> the documents --starts--> their first token

A sample is the pieces of those documents laid end to end (the first piece starts at the offset, the last one
stops at the end offset + ``extra``), cut at ``len(out)`` tokens and padded with ``pad`` if shorter.

``starts`` holds the global token offset of every document, plus the total token count as a last entry. The
tokens themselves live in one or more *parts*: a one-file ``.bin`` is a single part, a
:class:`~pretrain.data.parts.PartsDataset` has one per part file. ``part_starts`` is the global offset of each
part's first token, plus the total. A document never spans two parts, so each piece is copied from the part
holding its first token.

The walk (:func:`gather_one`) is written once, in plain Python. It is compiled with numba for uint16 and int32
tokens, where each part is read through its memory address (``part_addresses``; :func:`_copy_piece` has a
compiled twin for that), and the compiled gathers first load the first token of every document of the sample(s)
(``_touch``: the cache misses overlap); it runs as it is, on numpy slices of each part's array, for other token
dtypes, without numba or with ``NUMBA_DISABLE_JIT=1``. :func:`compiled_code` says which.

Entry points: :func:`gather` (any batch, either way) and, for the hot ``ds[i]``, :func:`state_row` +
:func:`sample_from_state` (the arrays' addresses in one int64 row: one argument to unbox instead of eleven, ~70 ns
each).
"""
from __future__ import annotations

import numpy as np

TOKEN_CODES = {np.dtype("<u2"): 0, np.dtype("<i4"): 1}  # token dtypes of the compiled gather
SHUFFLE_DTYPES = (np.dtype(np.uint32), np.dtype(np.int64))
SAMPLE_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
STATE_SIZE = 17  # addresses 0-5 and lengths 6-11 of the six arrays; shuffle, sample, token dtype codes; extra, pad


def _copy_piece(part_starts, parts, a, m, code, dst):
    """``m`` tokens from global token ``a`` into ``dst``, from the part holding ``a``: the last one starting at or
    before it (so empty parts are skipped). Python: ``parts`` is each part's tokens; compiled (the twin below):
    each part's address, ``code`` their dtype (``TOKEN_CODES``)."""
    p = np.searchsorted(part_starts, a, side="right") - 1
    dst[:] = parts[p][a - part_starts[p]:a - part_starts[p] + m]


def gather_one(i, shuffle, sample_flat, document_index, starts, part_starts, parts, code, out, extra, pad):
    """Tokens of sample ``i`` (through the shuffle index) into ``out``, padded with ``pad``."""
    size = out.shape[0]
    j = np.int64(shuffle[i])
    d0, o0 = np.int64(sample_flat[2 * j]), np.int64(sample_flat[2 * j + 1])
    d1, o1 = np.int64(sample_flat[2 * j + 2]), np.int64(sample_flat[2 * j + 3])
    pos = 0
    for d in range(d0, d1 + 1):
        e = np.int64(document_index[d])
        a = starts[e] + (o0 if d == d0 else 0)
        b = starts[e] + o1 + extra if d == d1 else starts[e + 1]
        m = min(b - a, size - pos)
        if m > 0:
            _copy_piece(part_starts, parts, a, m, code, out[pos:pos + m])
            pos += m
    out[pos:] = pad


def gather_py(idx, shuffle, sample_flat, document_index, starts, part_starts, part_tokens, out, extra, pad):
    """Samples ``idx`` into the rows of ``out``, in Python (``part_tokens``: each part's token array)."""
    for r in range(len(idx)):
        gather_one(idx[r], shuffle, sample_flat, document_index, starts, part_starts, part_tokens, 0, out[r], extra,
                   pad)


compiled = False  # numba is there (and not disabled): compiled_code() picks the compiled gather
sample_from_state = None

try:
    import numba
    from numba import types as _nbtypes
    from numba.core import cgutils as _cgutils
    from numba.extending import intrinsic as _intrinsic
    from numba.extending import overload as _overload

    if numba.config.DISABLE_JIT:  # NUMBA_DISABLE_JIT=1: the addresses cannot be read, so Python throughout
        raise ImportError
except ImportError:
    pass
else:
    @_intrinsic
    def _voidptr(typingctx, address):
        """An int64 address as a pointer, for ``numba.carray``."""
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], _cgutils.voidptr_t)
        return _nbtypes.voidptr(_nbtypes.int64), codegen

    @numba.njit(cache=True, nogil=True)
    def _part_of(part_starts, a):
        """The last part starting at or before global token ``a`` (a binary search: no call for one part)."""
        lo, hi = 0, part_starts.shape[0] - 1  # part_starts[lo] <= a < part_starts[hi] (the total)
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if part_starts[mid] <= a:
                lo = mid
            else:
                hi = mid
        return lo

    @_overload(_copy_piece)
    def _copy_piece_compiled(part_starts, parts, a, m, code, dst):
        def copy(part_starts, parts, a, m, code, dst):
            p = _part_of(part_starts, a)
            offset = a - part_starts[p]
            if code == 0:
                src16 = numba.carray(_voidptr(parts[p] + 2 * offset), (m,), np.uint16)
                for k in range(m):  # element by element over views: no index checks, so the copy vectorizes
                    dst[k] = src16[k]
            else:
                src32 = numba.carray(_voidptr(parts[p] + 4 * offset), (m,), np.int32)
                for k in range(m):
                    dst[k] = src32[k]
        return copy

    def _touch(i, shuffle, sample_flat, document_index, starts, part_starts, part_addresses, code):
        """Load the first token of each (non-empty) document of sample ``i``. The loads are independent, so the
        CPU overlaps their cache and TLB misses instead of taking them one after the other during the copy."""
        j = np.int64(shuffle[i])
        acc = 0
        for d in range(np.int64(sample_flat[2 * j]), np.int64(sample_flat[2 * j + 2]) + 1):
            e = np.int64(document_index[d])
            a = starts[e]
            if starts[e + 1] > a:
                p = _part_of(part_starts, a)
                if code == 0:
                    acc += numba.carray(_voidptr(part_addresses[p] + (a - part_starts[p]) * 2), (1,), np.uint16)[0]
                else:
                    acc += numba.carray(_voidptr(part_addresses[p] + (a - part_starts[p]) * 4), (1,), np.int32)[0]
        return acc

    _jit = numba.njit(cache=True, nogil=True)
    _touch, _gather_one = _jit(_touch), _jit(gather_one)  # gather_one itself stays Python, for gather_py

    @_jit
    def _gather_touched(idx, shuffle, sample_flat, document_index, starts, part_starts, part_addresses, code, out,
                        extra, pad):
        acc = 0
        for r in range(idx.shape[0]):  # touch the whole batch first: many misses in flight at once
            acc += _touch(idx[r], shuffle, sample_flat, document_index, starts, part_starts, part_addresses, code)
        for r in range(idx.shape[0]):
            _gather_one(idx[r], shuffle, sample_flat, document_index, starts, part_starts, part_addresses, code, out[r],
                        extra, pad)
        return acc  # returned, so the touches are not optimized away

    @_jit
    def _sample_from_arrays(i, st, out, shuffle, sample_flat):
        document_index = numba.carray(_voidptr(st[2]), (st[8],), np.int32)
        starts = numba.carray(_voidptr(st[3]), (st[9],), np.int64)
        part_starts = numba.carray(_voidptr(st[4]), (st[10],), np.int64)
        part_addresses = numba.carray(_voidptr(st[5]), (st[11],), np.int64)
        acc = _touch(i, shuffle, sample_flat, document_index, starts, part_starts, part_addresses, st[14])
        _gather_one(i, shuffle, sample_flat, document_index, starts, part_starts, part_addresses, st[14], out, st[15],
                    st[16])
        return acc

    @_jit
    def _sample_from_state(i, st, out):
        """``gather_one`` of sample ``i`` from a :func:`state_row` ``st``: the shuffle and sample index views are
        typed by their dtype codes, so each of the four combinations is compiled once."""
        shuffle32 = numba.carray(_voidptr(st[0]), (st[6],), np.uint32)
        shuffle64 = numba.carray(_voidptr(st[0]), (st[6],), np.int64)
        sample32 = numba.carray(_voidptr(st[1]), (st[7],), np.int32)
        sample64 = numba.carray(_voidptr(st[1]), (st[7],), np.int64)
        if st[12] == 0:
            if st[13] == 0:
                return _sample_from_arrays(i, st, out, shuffle32, sample32)
            return _sample_from_arrays(i, st, out, shuffle32, sample64)
        if st[13] == 0:
            return _sample_from_arrays(i, st, out, shuffle64, sample32)
        return _sample_from_arrays(i, st, out, shuffle64, sample64)

    compiled, sample_from_state = True, _sample_from_state


def compiled_code(shuffle, sample_flat, document_index, starts, token_dtype):
    """The token dtype code when the compiled gather takes these arrays, else None (the Python one does)."""
    code = TOKEN_CODES.get(np.dtype(token_dtype).newbyteorder("<"))
    if not compiled or code is None or document_index.dtype != np.int32 or starts.dtype != np.int64 or \
            shuffle.dtype not in SHUFFLE_DTYPES or sample_flat.dtype not in SAMPLE_DTYPES or \
            not all(a.flags.c_contiguous for a in (shuffle, sample_flat, document_index, starts)):
        return None
    return code


def part_addresses(part_tokens) -> np.ndarray:
    """Each part's token address (0 for an empty part, never read). Valid while the parts' arrays live."""
    return np.array([t.ctypes.data if len(t) else 0 for t in part_tokens], dtype=np.int64)


def state_row(shuffle, sample_flat, document_index, starts, part_starts, addresses, code, extra: int, pad: int):
    """The int64 row of :func:`sample_from_state`: the six arrays' addresses and lengths, the dtype codes, extra,
    pad. Valid in this process while the arrays live (rebuild it after unpickling)."""
    arrays = (shuffle, sample_flat, document_index, starts, part_starts, addresses)
    assert part_starts.dtype == addresses.dtype == np.int64 and part_starts.flags.c_contiguous
    row = np.array([a.ctypes.data for a in arrays] + [len(a) for a in arrays] +
                   [SHUFFLE_DTYPES.index(shuffle.dtype), SAMPLE_DTYPES.index(sample_flat.dtype), code, extra, pad],
                   dtype=np.int64)
    assert len(row) == STATE_SIZE
    return row


def gather(idx, shuffle, sample_flat, document_index, starts, part_starts, part_tokens, out, extra, pad,
           addresses=None, code=None):
    """Samples ``idx`` into the rows of ``out``: compiled when ``code`` (from :func:`compiled_code`) is given, with
    the parts' ``addresses``; in Python over ``part_tokens`` otherwise."""
    if code is None:
        gather_py(idx, shuffle, sample_flat, document_index, starts, part_starts, part_tokens, out, extra, pad)
    else:
        _gather_touched(idx, shuffle, sample_flat, document_index, starts, part_starts, addresses, code, out, extra,
                        pad)

