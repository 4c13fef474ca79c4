"""The extraction engines behind one interface: an engine is a function ``(html, url) -> text`` over the UTF-8
bytes of a page whose scripts, styles and comments are already cut out (``strip``), returning its main text
("" for none). ``engine_function(params)`` builds the one the stage's ``engine = ...`` names.

- ``blocks`` (default): the learned block classifier (``blocks``, ``features``, ``model``);
- ``resiliparse``: rules over resiliparse's DOM, then a line-level cleanup (``rules``, ``boilerplate``);
- ``trafilatura``: ``trafilatura.extract`` with its defaults, the reference the others are measured against.

A new engine is a function here and a name in ``ENGINES``.
"""
from __future__ import annotations

from typing import Callable

from curate.extract import blocks
from curate.extract.comments import with_comments
from curate.extract.rules import extract_resiliparse

Engine = Callable[[bytes, str], str]


def extract_trafilatura(html: str, url: str = "", comments: bool = True) -> str:
    import trafilatura

    return trafilatura.extract(html, url=url or None, include_comments=comments) or ""


def _blocks(params) -> Engine:
    # looked up on the module at each call (tests replace it there). The model leaves an article's comments
    # out; ``comments = true`` adds the page's comment threads (``comments.with_comments``), ``false`` keeps
    # them out of the rules engine's text too where a page falls back to it.
    rules_comments = params.comments is not False
    if params.comments:
        return lambda data, url: with_comments(
            blocks.extract_blocks_utf8(data, url, model=params.model, comments=rules_comments), data)
    return lambda data, url: blocks.extract_blocks_utf8(data, url, model=params.model, comments=rules_comments)


def _resiliparse(params) -> Engine:
    return lambda data, url: extract_resiliparse(data.decode("utf-8"), url, cleanup=params.cleanup,
                                                 comments=params.comments is not False)


def _trafilatura(params) -> Engine:
    return lambda data, url: extract_trafilatura(data.decode("utf-8"), url, comments=params.comments is not False)


ENGINES: dict[str, Callable[..., Engine]] = {"blocks": _blocks, "resiliparse": _resiliparse,
                                             "trafilatura": _trafilatura}


def engine_function(params) -> Engine:
    """The engine ``params.engine`` names, as the stage calls it: on the UTF-8 bytes of the stripped page."""
    return ENGINES[params.engine](params)
