"""HTML -> main text: the ``extract`` stage and what it runs.

Where to start reading:

- ``stage.py``: the stage (``Extract``, its ``Params``, reasons, the per-page loop);
- ``engines.py``: the engines behind one interface, ``(html bytes, url) -> text``: ``blocks.py`` (learned,
  the default), ``rules.py`` + ``boilerplate.py`` (resiliparse rules and line cleanup), trafilatura;
- the learned engine's parts, in the order a page goes through them: ``strip.py`` (scripts and styles
  cut out), ``depth.py`` (pages nested too deep for the parser), ``dom_scan.py`` (the compiled block walk
  over lexbor's tree) with ``dom_walk.py`` (its Python definition and fallback) and ``tags.py`` (the tag
  and class-word vocabulary), ``features.py`` (+ ``chars.py``) and ``model.py`` (the classifier; its file is
  ``models/extract_blocks.json``);
- ``training/``: labelling, training and evaluation of the model (``curate extractor train``).
"""
