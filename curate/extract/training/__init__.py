"""Tools around the learned extraction model, not used by the stage at run time: word F1 and block labels
(``labels``), training with cross-validation (``train``, the command ``curate extractor train``), and
snippet scoring of engines on trafilatura's real-world test pages (``evaluate``)."""
