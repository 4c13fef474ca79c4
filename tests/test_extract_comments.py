"""`extract`'s `comments` key on every engine: the learned engine leaves an article's comment threads out unless
`comments = true` adds them; the rules engine keeps them unless `comments = false`; a crafted page of many
threads costs no more than a real one."""
import time
from pathlib import Path

import pytest

from curate.config import ConfigError, dataclass_params
from curate.extract.comments import MAX_THREADS, comment_threads, with_comments
from curate.extract.stage import Extract, Params
from curate.extract.training.evaluate import load_pages
from curate.schema import HTML, documents_to_table

DATA = Path(__file__).parent / "data" / "extract"
BODY = "JSON for Modern C++"                    # in the post itself
REPLY = "We are working toward releasing version 0.2 on vcpkg."  # a reply in the comment thread
QUESTION = "how difficult to use your library is"  # a comment the rules engine finds too


@pytest.fixture(scope="module")
def blog_post():
    # a real blog post with a real comment thread (trafilatura's regression page; licence in tests/data/extract)
    pages = load_pages(DATA / "web-pages-87.warc.gz", DATA / "expected_snippets.json")
    page = next(p for p in pages if "lemire.me" in p.url)
    assert REPLY in page.html and BODY in page.html
    return page


def _extract(page, **params) -> str:
    table = documents_to_table([{"id": "p", "text": page.html, "source": "t", "url": page.url,
                                 "content_type": HTML}])
    res = Extract("extract", Params(**params)).apply(table)
    assert res.kept.num_rows == 1, res.dropped.to_pylist()
    return res.kept.column("text")[0].as_py()


def test_the_learned_engine_adds_an_articles_comments_only_when_asked(blog_post):
    default, without, with_ = (_extract(blog_post), _extract(blog_post, comments=False),
                               _extract(blog_post, comments=True))
    assert BODY in default and REPLY not in default  # the model's own policy: as both of its gold sets
    assert without == default
    assert with_.startswith(default)                  # the article first, as extracted without comments
    assert QUESTION not in default and with_.count(REPLY) == 1 and with_.count(QUESTION) == 1
    assert "Leave a Reply" not in with_ and "Your email address will not be published" not in with_


def test_the_rules_engine_keeps_comments_unless_told_not_to(blog_post):
    assert QUESTION in _extract(blog_post, engine="resiliparse")  # resiliparse's own default, as before
    assert QUESTION not in _extract(blog_post, engine="resiliparse", comments=False)


def test_comments_must_be_true_or_false():
    assert dataclass_params(Params, {"comments": True}, "stages[0]")["comments"] is True
    assert dataclass_params(Params, {}, "stages[0]")["comments"] is None
    with pytest.raises(ConfigError, match=r"stages\[0\]\.comments = 'yes': expected"):
        dataclass_params(Params, {"comments": "yes"}, "stages[0]")


def test_threads_already_kept_are_not_repeated_and_pages_without_threads_are_left_alone():
    page = ("<html><body><article><p>The post itself, long enough to be read as prose by anyone.</p></article>"
            "<div id='comments'><ol class='commentlist'><li><p>First reader comment here, kept once.</p></li>"
            "<li><p>Second reader comment, with a thought of its own.</p></li></ol></div></body></html>")
    threads = comment_threads(page)
    assert threads.split("\n") == ["First reader comment here, kept once.",
                                   "Second reader comment, with a thought of its own."]
    assert comment_threads(page.encode()) == threads
    kept = "The post itself.\nFirst reader comment here, kept once."
    assert with_comments(kept, page) == kept + "\nSecond reader comment, with a thought of its own."
    assert with_comments("text", "<p>no threads on this page at all</p>") == "text"
    assert with_comments("", page) == threads


def test_a_page_of_a_hundred_thousand_threads_reads_a_bounded_number():
    line = "A reader's comment, in a sentence of its own."
    flat = "<html><body>" + f"<div class='comments'><p>{line}</p></div>" * 100_000 + "</body></html>"
    nested = "<html><body>" + f"<div class='comments'><p>{line}</p>" * 200 + "</div>" * 200 + "</body></html>"
    start = time.process_time()
    assert comment_threads(flat).count(line) == MAX_THREADS  # the first threads, not all 100,000
    assert comment_threads(nested).count(line) == 200  # one outermost thread holds them all, read once
    assert time.process_time() - start < 30  # linear: a few seconds on a slow core; quadratic would be hours
