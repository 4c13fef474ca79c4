"""``blocks.page_forms``: a form after a page's text (a comment form, a sign-up, a question box) is not its
text, unless the form is the page's own wrapper or text follows it."""
import numpy as np

from curate.extract.blocks import page_forms, page_text

ARTICLE = ["The flood of 1911"] + [f"Paragraph {i} tells how the river flooded the old mill town in the spring "
                                   "and how the people rebuilt the bridge, stone by stone." for i in range(5)]
FORM = ["Leave a reply", "Your email address will not be published. Required fields are marked *", "Name *",
        "Email *", "Website"]


def _page(texts, in_form, prob):
    n = len(texts)
    tags = ["h1"] + ["p"] * (n - 1)
    groups = np.zeros((n, 9), dtype=np.int64)  # one container at every level
    places = np.zeros((n, 3), dtype=bool)
    places[:, 2] = in_form
    return page_text(texts, tags, groups, np.asarray(prob, dtype=np.float32), 0.35, "<html></html>",
                     chrome=np.zeros(n, dtype=bool), places=places)


def test_a_comment_form_after_the_article_is_dropped():
    texts = ARTICLE + FORM
    in_form = [False] * len(ARTICLE) + [True] * len(FORM)
    prob = [0.9] * len(ARTICLE) + [0.6, 0.5, 0.4, 0.4, 0.4]  # the classifier kept the form's labels
    out = _page(texts, in_form, prob)
    assert "Paragraph 4" in out
    for label in FORM:
        assert label not in out.splitlines()


def test_a_form_that_text_follows_is_kept():
    # a forum whose posts sit in a moderation form, with the thread's last kept block after it
    texts = ["Thread title"] + ARTICLE[1:] + ["Reply to this thread with your own experience."]
    in_form = [False, True, True, True, True, True, False]
    out = _page(texts, in_form, [0.9] * len(texts))
    assert all(t in out for t in texts)


def test_a_page_wrapped_in_a_form_keeps_its_text():
    # an ASP.NET page: <form id="aspnetForm"> around the whole body, the article included
    texts = ARTICLE + FORM[:1]
    in_form = [False] + [True] * (len(texts) - 1)
    out = _page(texts, in_form, [0.9] * len(texts))
    assert all(t in out for t in ARTICLE)


def test_page_forms_leaves_probabilities_alone_without_a_kept_form_block():
    prob = np.array([0.9, 0.1, 0.2], dtype=np.float32)
    out = page_forms(["a long paragraph", "Name", "Email"], [False, True, True], prob, 0.35)
    assert np.array_equal(out, prob)
