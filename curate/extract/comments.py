"""User comment threads under an article, for ``extract``'s ``comments = true`` on the learned engine.

What a comment thread is worth is a policy, and the sets disagree: Mozilla Readability's expected texts and
WCXB's article pages leave the comments under an article out (WCXB's forum pages keep the posts), FineWeb's
extraction (DataTrove's trafilatura step, ``include_comments=False``) leaves them out, trafilatura's own
default keeps them. The block classifier learned the first: it keeps a forum's posts and leaves an article's
comments out. ``comments = true`` adds them back: the text of each outermost element that the rules engine
names a comment thread (``rules._COMMENTS_SELECTOR``: classes ``comments``, ``comment-list``, ...; ids
``comments``, ``disqus_thread``) and that is a container (``CONTAINERS``: a teaser's comment count in a
``<span class="comments">`` is not a thread), without its comment form and author boxes (``rules._SKIP_SELECTORS``),
through the line cleanup (``boilerplate.clean``); lines the engine already kept are not repeated.

Cost: one more linear parse, and only of pages whose HTML names a comment or Disqus at all.
"""
from __future__ import annotations

from curate.extract.rules import _COMMENTS_SELECTOR, _SKIP_SELECTORS, _items

CONTAINERS = {"div", "section", "ol", "ul", "dl", "aside", "article", "footer", "main", "table", "tbody"}
MAX_THREADS = 50  # outermost threads read per page (real pages have one or two; a crafted page may have 10^5)


def comment_threads(html: str | bytes) -> str:
    """The text of the page's comment threads ("" for none), one line per paragraph, outermost threads only."""
    if isinstance(html, bytes):
        if b"comment" not in html and b"disqus" not in html:
            return ""
        html = html.decode("utf-8", errors="replace")
    elif "comment" not in html and "disqus" not in html:
        return ""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    from curate.extract.boilerplate import clean

    body = HTMLTree.parse(html).body
    if body is None:
        return ""
    # the outermost threads that are containers (not a teaser's comment count in a <span>); matches come in
    # document order, so a thread's inner matches follow it at once and one test against the last suffices
    outer = []
    for node in _items(body.query_selector_all(_COMMENTS_SELECTOR)):
        if node.tag in CONTAINERS and (not outer or not outer[-1].contains(node)):
            outer.append(node)
            if len(outer) == MAX_THREADS:
                break
    parts = [extract_plain_text(n.html, list_bullets=False, alt_texts=False, skip_elements=_SKIP_SELECTORS)
             for n in outer]
    lines = (line.strip() for line in clean("\n".join(parts)).split("\n"))
    return "\n".join(line for line in lines if line)


def with_comments(text: str, html: str | bytes) -> str:
    """``text`` (an engine's main text of the page) followed by the lines of the page's comment threads that
    it does not already hold."""
    threads = comment_threads(html)
    if not threads:
        return text
    held = {line.strip() for line in text.split("\n")}
    extra = [line for line in dict.fromkeys(threads.split("\n")) if line not in held]
    if not extra:
        return text
    return (text + "\n" if text else "") + "\n".join(extra)
