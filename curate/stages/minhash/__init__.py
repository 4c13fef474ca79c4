"""Fuzzy deduplication with MinHash + LSH: the ``minhash_dedup`` stage (MT-NLG / NeMo Curator recipe).

Modules, in the order the plan runs them:

- ``shingles``   the documented text normalization, words and word n-gram shingles (64-bit hashes)
- ``signatures`` MinHash permutations (multiply-shift by default, or exact mod 2^61 - 1), LSH band
                 hashes, the S-curve ``P(s) = 1 - (1 - s^r)^b`` and the choice of (b, r) for a threshold
- ``buckets``    per shard: band hashes sorted per band; per hash range: buckets -> candidate edges
- ``clusters``   union-find, representatives (highest quality, then smallest id), exact Jaccard,
                 optional verification against the representative
- ``stage``      the ``MinHashDedup`` global stage: plan (resumable, same result for any worker count)
                 and apply (``near_duplicate`` with ``duplicate_of``)
- ``inspect``    ``curate clusters OUT --show N``
- ``kernels``    every numba kernel (one file, so compiled caches never go stale)
- ``store``      atomic writes of numpy parts and grouped Arrow IPC files

``curate.stages.decontaminate`` reuses the normalization and the word kernels.
"""
