"""Sample gathers over a dataset of parts (:class:`~pretrain.data.parts.PartsDataset`), for ``GPTDataset``.

A sample's document pieces are found as over one file (global token offsets of the parts laid end to end); each
piece is copied from the one part holding it (a sequence never spans two parts). Compiled with numba: the tokens are
read through each part's memory-map address, and ``ds[i]`` passes one int64 state row (addresses, lengths, dtype
codes) as the one-file fast path does; in Python (no numba, or dtypes other than uint16/int32) otherwise.
"""
from __future__ import annotations

import numpy as np

PART_CODES = {np.dtype("<u2"): 0, np.dtype("<i4"): 1}  # token dtypes of the compiled gather
SHUFFLE_DTYPES = (np.dtype(np.uint32), np.dtype(np.int64))
SAMPLE_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
gather_parts_many = parts_from_state = None


def _sample_pieces(i, shuffle, sample_flat, document_index, starts, size, extra):
    """(global token start, length) of each document piece of sample ``i``, as ``_gather_one`` copies them."""
    j = np.int64(shuffle[i])
    d0, o0 = np.int64(sample_flat[2 * j]), np.int64(sample_flat[2 * j + 1])
    d1, o1 = np.int64(sample_flat[2 * j + 2]), np.int64(sample_flat[2 * j + 3])
    pieces, pos = [], 0
    for d in range(d0, d1 + 1):
        e = np.int64(document_index[d])
        a = starts[e] + (o0 if d == d0 else 0)
        b = starts[e] + o1 + extra if d == d1 else starts[e + 1]
        m = min(b - a, size - pos)
        if m > 0:
            pieces.append((a, m))
            pos += m
    return pieces


def gather_parts_py(idx, shuffle, sample_flat, document_index, starts, part_starts, part_tokens, out, extra, pad):
    """The gather over a dataset of parts, in Python (dtypes the compiled one does not take, or no numba)."""
    for r in range(len(idx)):
        pos = 0
        for a, m in _sample_pieces(idx[r], shuffle, sample_flat, document_index, starts, out.shape[1], extra):
            p = int(np.searchsorted(part_starts, a, side="right")) - 1
            out[r, pos:pos + m] = part_tokens[p][a - part_starts[p]:a - part_starts[p] + m]
            pos += m
        out[r, pos:] = pad


try:
    import numba
    from numba import types as _nbtypes
    from numba.core import cgutils as _cgutils
    from numba.extending import intrinsic as _intrinsic

    @_intrinsic
    def _voidptr(typingctx, address):
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], _cgutils.voidptr_t)
        return _nbtypes.voidptr(_nbtypes.int64), codegen

    @numba.njit(cache=True, nogil=True)
    def _copy_from_part(address, offset, m, code, dst):
        """``m`` tokens from token ``offset`` of the part whose tokens start at ``address`` into ``dst``."""
        if code == 0:
            src16 = numba.carray(_voidptr(address + offset * 2), (m,), np.uint16)
            for k in range(m):
                dst[k] = src16[k]
        else:
            src32 = numba.carray(_voidptr(address + offset * 4), (m,), np.int32)
            for k in range(m):
                dst[k] = src32[k]

    @numba.njit(cache=True, nogil=True)
    def _gather_parts_one(i, shuffle, sample_flat, document_index, starts, part_starts, part_addresses, code, out,
                          extra, pad):
        """``_gather_one`` over a dataset of parts: each document piece is copied from the part holding it."""
        size = out.shape[0]
        j = np.int64(shuffle[i])
        d0 = np.int64(sample_flat[2 * j])
        o0 = np.int64(sample_flat[2 * j + 1])
        d1 = np.int64(sample_flat[2 * j + 2])
        o1 = np.int64(sample_flat[2 * j + 3])
        pos = 0
        for d in range(d0, d1 + 1):
            e = np.int64(document_index[d])
            a = starts[e] + (o0 if d == d0 else 0)
            b = starts[e] + o1 + extra if d == d1 else starts[e + 1]
            m = min(b - a, size - pos)
            if m > 0:  # a sequence never spans two parts: the piece lies in the last part starting at or before a
                p = np.searchsorted(part_starts, a, side="right") - 1
                _copy_from_part(part_addresses[p], a - part_starts[p], m, code, out[pos:pos + m])
                pos += m
        for k in range(pos, size):
            out[k] = pad

    @numba.njit(cache=True, nogil=True)
    def _gather_parts_many(idx, shuffle, sample_flat, document_index, starts, part_starts, part_addresses, code,
                           out, extra, pad):
        for r in range(idx.shape[0]):
            _gather_parts_one(idx[r], shuffle, sample_flat, document_index, starts, part_starts, part_addresses, code,
                              out[r], extra, pad)

    # ds[i] over parts, from one int64 state row as ``_sample_from_state`` (addresses 0-5, lengths 6-11, codes of
    # shuffle, sample and tokens 12-14, extra 15, pad 16): one argument to unbox instead of eleven
    @numba.njit(cache=True, nogil=True)
    def _parts_with_sample(i, st, out, shuffle, sample):
        doc = numba.carray(_voidptr(st[2]), (st[8],), np.int32)
        starts = numba.carray(_voidptr(st[3]), (st[9],), np.int64)
        part_starts = numba.carray(_voidptr(st[4]), (st[10],), np.int64)
        part_addresses = numba.carray(_voidptr(st[5]), (st[11],), np.int64)
        _gather_parts_one(i, shuffle, sample, doc, starts, part_starts, part_addresses, st[14], out, st[15], st[16])

    @numba.njit(cache=True, nogil=True)
    def _parts_with_shuffle(i, st, out, shuffle):
        if st[13] == 0:
            _parts_with_sample(i, st, out, shuffle, numba.carray(_voidptr(st[1]), (st[7],), np.int32))
        else:
            _parts_with_sample(i, st, out, shuffle, numba.carray(_voidptr(st[1]), (st[7],), np.int64))

    @numba.njit(cache=True, nogil=True)
    def _parts_from_state(i, st, out):
        if st[12] == 0:
            _parts_with_shuffle(i, st, out, numba.carray(_voidptr(st[0]), (st[6],), np.uint32))
        else:
            _parts_with_shuffle(i, st, out, numba.carray(_voidptr(st[0]), (st[6],), np.int64))

    gather_parts_many, parts_from_state = _gather_parts_many, _parts_from_state
except ImportError:  # pragma: no cover - numba is a dependency; the Python gather still works
    pass


def parts_state(shuffle, sample_flat, document_index, starts, part_starts, part_addresses, token_dtype, extra: int,
                pad: int):
    """The int64 state row of :func:`parts_from_state`, or False when these arrays cannot take the compiled path."""
    code = PART_CODES.get(np.dtype(token_dtype).newbyteorder("<"))
    arrays = (shuffle, sample_flat, document_index, starts, part_starts, part_addresses)
    if parts_from_state is None or code is None or not all(a.flags.c_contiguous for a in arrays) or \
            document_index.dtype != np.int32 or shuffle.dtype not in SHUFFLE_DTYPES or \
            sample_flat.dtype not in SAMPLE_DTYPES:
        return False
    return np.array([a.ctypes.data for a in arrays] + [len(a) for a in arrays] +
                    [SHUFFLE_DTYPES.index(shuffle.dtype), SAMPLE_DTYPES.index(sample_flat.dtype), code, extra, pad],
                    dtype=np.int64)
