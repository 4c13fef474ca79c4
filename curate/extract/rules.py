"""The ``resiliparse`` engine: rules over resiliparse's DOM.

resiliparse ``extract_plain_text(main_content=True, post_meta=False)`` on a DOM that a short pre-pass
adjusted (embedded tweets and text-heavy blocks with "share"/"social" class names kept; author boxes and
comment forms skipped; comment threads kept even when resiliparse would restrict extraction to an article
container that does not hold them), falling back to the whole page when the main-content rules leave under
200 characters, then the line-level cleanup of ``boilerplate`` (``cleanup = false`` skips it). A page with an
element more than 100 levels deep gets the linear whole-page extraction (resiliparse's main-content rules
cost O(elements x depth) in C, where the stage's time limit cannot stop them).
"""
from __future__ import annotations

import re

# The pre-pass. Every selector query is a walk over the whole DOM, so the pre-pass makes one query for all
# its candidates, and plain string tests on their class and id attributes then decide:
#
# - Embedded posts quoted in an article (tweets, Instagram or Mastodon posts): resiliparse drops them for
#   their "twitter"/"social" class names; they are part of the article. Kept.
# - Class names resiliparse reads as share bars / social widgets (its own class regex, _SOCIAL_CLASS, below).
#   A share bar holds a few links; such an element around a run of paragraphs is a layout wrapper of the
#   article itself. Kept.
# - resiliparse 2.0 restricts main-content extraction to the one element with a class in _ROOT_CLASSES
#   (or role="main") when exactly one has; comment threads outside that element are then lost. When there
#   are such threads, that element loses its root class, and extraction runs on the whole body with
#   resiliparse's main-content rules (as on pages without such an element).
_EMBED_KEYS = ("tweet", "twitter", "instagram", "mastodon")
_SOCIAL_CLASS = re.compile(r"(?:^|\s|__|--|mobile-|desktop-|l-|m-|c-)(?:social(?:media)?|share(?:daddy)?|sharing)"
                           r"(?:[_-]?(?:post|links?|section|icons?|btn|buttons?|target))?(?:$|[\s_-])", re.I)
_PARAGRAPH_RUN = "p ~ p ~ p"  # three sibling paragraphs somewhere inside
_ROOT_CLASSES = {"article-body", "articleBody", "contentBody", "article-text", "main-content", "postcontent",
                 "post-content", "single-post"}
_ROOT_SELECTOR = ", ".join(["." + c for c in sorted(_ROOT_CLASSES)] + ['[role="main"]'])
_COMMENT_CLASSES = {"comments", "comment-list", "commentlist", "comments-area", "comment-section", "comments-container"}
_COMMENT_IDS = {"comments", "comments-section", "disqus_thread"}
_COMMENTS_SELECTOR = ", ".join(["." + c for c in sorted(_COMMENT_CLASSES)] + ["#" + i for i in sorted(_COMMENT_IDS)])
_PREPASS_SELECTOR = "blockquote[class], [class*=shar], [class*=social]"
# Author boxes (photo, name and a short bio beside the post) and comment forms (prompts, field labels,
# privacy notes) are never content: skipped by the extractor itself (its skip query is one walk anyway).
_SKIP_SELECTORS = ["[class*=author-box]", "[id*=author-box]", "[class*=authorbox]", "[class*=author_box]",
                   "[class*=author-bio]", "[id*=author-bio]", "[class*=author-desc]", "[id*=author-desc]",
                   "[class*=about-author]", "[id*=about-author]", "[class*=author-info]", "[id*=author-info]",
                   "#respond", ".comment-respond", "[class*=comment-form]", "[id*=comment-form]"]
# Below this many characters of main content, fall back to the whole page (then the line cleanup).
_FALLBACK_BELOW_CHARS = 200
# resiliparse's main-content rules cost O(elements x DOM depth) (each element's depth and link density are
# computed by walking up / over its subtree), in C where no signal can stop them: deeply nested pages take
# seconds to minutes. Real pages are 10-40 elements deep. A page with an
# element more than _MAX_DEPTH deep gets the linear whole-page extraction instead (then the line cleanup).
# The check is one selector query: an element with _MAX_DEPTH element ancestors.
_MAX_DEPTH = 100
_DEEP_SELECTOR = "* > " * _MAX_DEPTH + "*"


def _items(node_list):
    # item(i), not iteration: iterating an ElementNodeList is quadratic in resiliparse 2.0.1.
    return [node_list.item(i) for i in range(len(node_list))]


def _prepass(body, find_threads: bool):
    """Adjust the DOM in place; return (article roots, comment threads) when ``find_threads``."""
    selector = _PREPASS_SELECTOR + ", " + _ROOT_SELECTOR + ", " + _COMMENTS_SELECTOR if find_threads else _PREPASS_SELECTOR
    roots, threads = [], []
    for node in _items(body.query_selector_all(selector)):
        cls = node.getattr("class") or ""
        if node.tag == "blockquote" and any(k in cls for k in _EMBED_KEYS):
            node.setattr("class", "embedded-post")
            continue
        if find_threads:
            tokens = set(cls.split())
            if tokens & _ROOT_CLASSES or node.getattr("role") == "main":
                roots.append(node)
            if tokens & _COMMENT_CLASSES or node.getattr("id") in _COMMENT_IDS:
                threads.append(node)
        if ("shar" in cls or "social" in cls) and _SOCIAL_CLASS.search(cls) \
                and node.query_selector(_PARAGRAPH_RUN) is not None:
            node.setattr("class", "content-wrapper")
    return roots, threads


def extract_resiliparse(html: str, url: str = "", cleanup: bool = True, comments: bool = True) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    body = tree.body
    if body is None:
        return ""
    if body.query_selector(_DEEP_SELECTOR) is not None:
        text = extract_plain_text(tree, main_content=False, alt_texts=False, skip_elements=_SKIP_SELECTORS)
        if cleanup:
            from curate.extract.boilerplate import clean

            text = clean(text)
        return text
    find_threads = comments and ("comment" in html or "disqus" in html)
    roots, threads = _prepass(body, find_threads)
    if len(roots) == 1 and any(not roots[0].contains(t) and not t.contains(roots[0]) for t in threads):
        root = roots[0]
        root.setattr("class", " ".join(c for c in (root.getattr("class") or "").split() if c not in _ROOT_CLASSES))
        if root.getattr("role") == "main":
            root.delattr("role")
    text = extract_plain_text(tree, main_content=True, alt_texts=False, comments=comments, post_meta=False,
                              skip_elements=_SKIP_SELECTORS)
    if len(text) < _FALLBACK_BELOW_CHARS:
        # The main-content rules removed (nearly) everything: some layouts put the article inside an
        # element they read as chrome. Take the whole page and let the line cleanup remove the chrome.
        full = extract_plain_text(tree, main_content=False, alt_texts=False, skip_elements=_SKIP_SELECTORS)
        if len(full) > len(text):
            text = full
    if cleanup:
        from curate.extract.boilerplate import clean

        text = clean(text)
    return text

