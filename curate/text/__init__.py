"""Text primitives the stages share: word splitting (spaCy's tokens, fast, or one regex), sentence
counting, token n-grams, fastText prediction and DataTrove's punctuation sets.

Everything here is a pure function of its input or a per-process memo of one (a chunk's spaCy
tokens, a word's fastText rows): results never depend on what was seen before. What one stage
learns of a batch's texts for the stages after it travels in the batch's ``BatchContext``.
"""
