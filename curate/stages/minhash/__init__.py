"""Fuzzy deduplication with MinHash + LSH (the ``minhash_dedup`` stage); see ``stage.py``."""
