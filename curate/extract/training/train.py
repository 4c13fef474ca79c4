"""Train the ``extract`` stage's block classifier on pages with gold main text (the shipped model: WCXB's
development split and Mozilla Readability's test pages together).

    curate extractor train --warc wcxb_dev.warc.gz --gold wcxb_dev_gold.jsonl \\
        --warc readability.warc.gz --gold readability_gold.jsonl --out curate/extract/models/extract_blocks.json

``--out`` is required: the shipped model is replaced only when ``--out`` names it. Before any page is cut into
blocks, every gold record is checked (``gold_record_problem``: ``url``, ``id``, ``main_content`` and the optional
``page_type``, ``lang``, ``source_url`` of their JSON types, one record per URL), and a gold file whose pages'
main_content holds no word is refused; after labelling, a set none of whose blocks the gold covers, or fewer than
``MIN_LABELLED_BLOCKS`` blocks of main content or of the rest, is refused (``label_problem``): such gold trains a
model that keeps nothing.

Steps: read the pages with the project's WARC reader (decoded as a curation run decodes them), cut each
into blocks with features (``curate.extract.features``), label each block by how much of it the gold text
covers (``labels``), then

1. **k-fold cross-validation** by site (``--folds``, default 5; the sites, ``page_group``, dealt to folds in a
   seeded shuffled order, so no fold's model has seen a page of the same set and site): a model trained on the other folds predicts each page; the word F1 of those predictions is
   the honest figure (per page type and overall);
2. the final model is trained on all pages; its in-sample F1 is printed next to the CV figure (the gap is
   how much the model fits the development pages);
3. the model is written as JSON (``curate.extract.model``), atomically.

The network (``curate.extract.model``: per-block layer, then context layers over neighbours and DOM containers)
is trained with torch (CPU, seeded, one thread: the same command gives the same
model); inference needs only numpy. Loss: binary cross-entropy on the soft block label, each block
weighted by its share of its page's tokens, so every page counts about equally, as in the metric, and each
set's pages by one weight that gives every set the same total (``set_factors``: 130 Readability pages count
as much as 1,497 WCXB pages; ``--weigh-pages-equally`` turns it off); the threshold is the one with the best
mean over sets of the cross-validated F1 (``balanced_f1``);
AdamW with weight decay 0.05 (``--weight-decay``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from curate import json_files
from curate.extract.features import features
from curate.extract.model import CONTEXT_PARTS, SHIFTS, BlockModel
from curate.extract.training.labels import block_labels, language_group, tokens, word_f1


@dataclass
class Page:
    id: str
    page_type: str
    html: str
    gold: str
    group: str = ""        # pages of one group share a cross-validation fold (``page_group``); "": the id


def page_group(gold_name: str, d: dict) -> str:
    """A page's cross-validation group: its set (the gold file's name) and site, so that no fold's model has
    seen another page of the same site (WCXB: the host of ``source_url``; Readability's pages, which have
    none: the id without a trailing ``-N``, as ``nytimes-1`` ... ``nytimes-5``)."""
    host = urlsplit(d.get("source_url") or "").hostname or ""
    site = host.removeprefix("www.") or re.sub(r"-\d+$", "", str(d["id"]))
    return f"{gold_name}:{site}"


@dataclass
class Dataset:
    pages: list[Page]
    x: np.ndarray          # [blocks, features]
    y: np.ndarray          # soft label per block
    tokens: np.ndarray     # \w+ tokens per block
    page: np.ndarray       # page index per block (blocks of a page are contiguous, in page order)
    groups: np.ndarray     # [blocks, 3] container element ids within the page
    texts: list[str]       # block texts
    tags: list[str]
    owner: np.ndarray      # owning element per block (``features.Blocks.owner``)
    parents: dict[int, np.ndarray]  # page index -> its elements' parents (``features.Blocks.parent``)


# the fields of a gold record that training reads, and the JSON types each may have (None: JSON null or absent)
GOLD_FIELDS = {"url": (str,), "main_content": (str,), "id": (str, int), "page_type": (str, type(None)),
               "lang": (str, type(None)), "source_url": (str, type(None))}
REQUIRED_GOLD_FIELDS = ("url", "id", "main_content")
_JSON_TYPE = {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
              dict: "an object", type(None): "null"}


def gold_record_problem(d) -> str | None:
    """What is wrong with one parsed gold line (None: nothing): an object with ``url``, ``id`` and
    ``main_content``, each field training reads of its type (``GOLD_FIELDS``); ``page_type`` "all" is the
    overall figure's name."""
    if not isinstance(d, dict):
        return f"not a gold record: {_JSON_TYPE.get(type(d), type(d).__name__)}, not an object with url, id and " \
               "main_content"
    missing = [k for k in REQUIRED_GOLD_FIELDS if k not in d]
    if missing:
        return f"not a gold record: no {', '.join(missing)} (an object with url, id and main_content)"
    for k, types in GOLD_FIELDS.items():
        v = d.get(k)
        if not isinstance(v, types) or isinstance(v, bool):
            want = " or ".join(_JSON_TYPE[t] for t in types)
            return f"not a gold record: field {k} must be {want}, not {_JSON_TYPE.get(type(v), type(v).__name__)}"
    if not d["url"].strip():
        return "not a gold record: field url is empty"
    if isinstance(d["id"], str) and not d["id"].strip():
        return "not a gold record: field id is empty"
    if d.get("source_url"):
        try:
            urlsplit(d["source_url"]).hostname
        except ValueError as e:
            return f"not a gold record: field source_url {d['source_url'][:200]!r} is not a URL ({e})"
    if d.get("page_type") == "all":
        return 'page_type "all" is the name of the overall figure: give the pages another type'
    return None


def read_gold(gold: str) -> dict[str, dict]:
    """The records of a gold JSONL by URL, in file order, each checked (``gold_record_problem``); a bad line,
    or a URL given twice, is a ``ValueError`` naming ``file:line``."""
    golds: dict[str, dict] = {}
    line_of: dict[str, int] = {}
    with open(gold, encoding="utf-8") as f:
        for n, line in enumerate(_utf8_lines(f, gold), 1):
            if not line.strip():
                continue
            d = json_files.loads(line, f"{gold}:{n}")
            problem = gold_record_problem(d)
            if problem:
                raise ValueError(f"{gold}:{n}: {problem}")
            if d["url"] in golds:
                raise ValueError(f"{gold}:{n}: url {d['url'][:200]!r} has a record already, on line "
                                 f"{line_of[d['url']]}: give one record per page")
            golds[d["url"]] = d
            line_of[d["url"]] = n
    return golds


def load_pages(warc: str, gold: str, limit: int = 0) -> list[Page]:
    """Pages of ``warc`` that have a gold record (matched by URL), in the gold file's order. A gold record
    without ``page_type`` (Readability's) gets its language group (``labels.language_group``) as one. A file
    that is not a regular file, a gold line that is not a record with ``url``, ``id`` and ``main_content`` of the
    right types (``read_gold``), no page matched, or no matched page with any main content is a ``ValueError``
    naming it. All before any page is cut into blocks."""
    import stat

    from curate.readers import read_file

    for path in (warc, gold):
        if not stat.S_ISREG(os.stat(path).st_mode):  # /dev/zero or a FIFO would be read for ever
            raise ValueError(f"{path}: not a regular file")
    golds = read_gold(gold)
    html = {}
    for item in read_file(str(warc), "warc"):
        if item[0] == "doc" and item[1]["url"] in golds:
            html[item[1]["url"]] = item[1]["text"] or ""
    if not html:
        raise ValueError(f"no page of {warc} has a record in {gold} (matched by URL: WARC-Target-URI = url)")
    if not any(tokens(golds[u]["main_content"]) for u in html):
        raise ValueError(f"{gold}: main_content holds no word for any of the {len(html)} pages it gives for {warc}: "
                         "there is no main content to learn from (a gold file of empty main_content?)")
    name = set_name(gold)
    pages = [Page(str(d["id"]), d.get("page_type") or language_group(d.get("lang"), d["main_content"]), html[u],
                  d["main_content"], page_group(name, d)) for u, d in golds.items() if u in html]
    return pages[:limit] if limit else pages


def _utf8_lines(f, path: str):
    try:
        yield from f
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start} of a read)") from None


def set_name(gold: str) -> str:
    """A set's name: its gold file's name up to the first dot (``page_group``'s prefix, ``set_of``)."""
    return Path(gold).name.split(".")[0]


def load_sets(warcs: list[str], golds: list[str], limit: int = 0) -> list[Page]:
    """The pages of several sets (``warcs[i]`` with ``golds[i]``), one after the other (``limit``: per set).
    Two gold files of the same set name (``set_name``) are refused: their pages would count as one set."""
    if len(warcs) != len(golds):
        raise ValueError(f"{len(warcs)} --warc but {len(golds)} --gold: give one gold file per WARC, in order")
    seen: dict[str, str] = {}
    for g in golds:
        other = seen.setdefault(set_name(g), g)
        if other != g or golds.count(g) > 1:
            raise ValueError(f"--gold {g} and --gold {other}: the same set name {set_name(g)!r} (a set is named by "
                             "its gold file's name up to the first dot): their pages would count as one set; give "
                             "each set its own file name")
    return [p for w, g in zip(warcs, golds) for p in load_pages(w, g, limit)]


def build(pages: list[Page], log=print) -> Dataset:
    xs, ys, cs, ps, gs, texts, tags, owners, parents = [], [], [], [], [], [], [], [], {}
    t0 = time.perf_counter()
    for i, p in enumerate(pages):
        b = features(p.html)
        if b is None:
            continue
        y, c = block_labels(b.texts, p.gold)
        xs.append(b.features)
        ys.append(y)
        cs.append(c)
        ps.append(np.full(len(y), i, dtype=np.int64))
        gs.append(b.groups)
        texts += b.texts
        tags += b.tags
        owners.append(b.owner)
        parents[i] = b.parent
        if (i + 1) % 250 == 0:
            log(f"  features: {i + 1}/{len(pages)} pages, {time.perf_counter() - t0:.0f} s")
    if not xs:
        raise ValueError(f"none of the {len(pages)} pages has a block of text to label (empty or script-only HTML?)")
    return Dataset(pages, np.concatenate(xs), np.concatenate(ys), np.concatenate(cs), np.concatenate(ps),
                   np.concatenate(gs), texts, tags, np.concatenate(owners), parents)


MIN_LABELLED_BLOCKS = 10  # of each class (main content, the rest) to train on: one real page has 10 to 50


def label_problem(ds: Dataset, golds: list[str] | None = None) -> str | None:
    """What makes ``ds`` unfit to train on (None: nothing): fewer than ``MIN_LABELLED_BLOCKS`` blocks (with
    words) labelled main content (label >= 0.5: the gold text covers most of the block) or labelled the rest,
    or a set (``set_of``; ``golds``: the gold files, to name them) none of whose blocks is main content: the
    gold text does not match its pages (a gold file of empty or wrong main_content, a WARC of other pages)."""
    worded = ds.tokens > 0
    content = worded & (ds.y >= 0.5)
    n_content, n_rest = int(content.sum()), int((worded & (ds.y < 0.5)).sum())
    files = {set_name(g): g for g in golds or []}
    page_set = np.array([set_of(p) for p in ds.pages], dtype=object)
    for name in dict.fromkeys(page_set.tolist()):
        in_set = page_set[ds.page] == name
        if not (content & in_set).any():
            gold = files.get(name, name or "the gold file")
            return (f"{gold}: no block of its {int(in_set.sum())} blocks is main content (covered by its gold "
                    "main_content): the gold text does not match the pages (empty or wrong main_content, or the "
                    "WARC of other pages)")
    if min(n_content, n_rest) < MIN_LABELLED_BLOCKS:
        return (f"{n_content} blocks labelled main content and {n_rest} labelled the rest: at least "
                f"{MIN_LABELLED_BLOCKS} of each are needed to train (more pages, or gold text that is not the whole "
                "page)")
    return None


def sample_weights(ds: Dataset, idx: np.ndarray) -> np.ndarray:
    tok = ds.tokens[idx]
    total = np.bincount(ds.page[idx], weights=tok, minlength=len(ds.pages))[ds.page[idx]]
    return (tok / np.maximum(total, 1.0)).astype(np.float32)


def set_factors(ds: Dataset, pages: np.ndarray) -> np.ndarray:
    """Per page of ``ds``: the weight that gives every set (``set_of``) among the training ``pages`` the same
    total weight (1.0 for every page when they come from one set)."""
    sets = [set_of(p) for p in ds.pages]
    count = Counter(sets[int(p)] for p in pages)
    per_set = len(pages) / max(len(count), 1)
    return np.array([per_set / count[s] if s in count else 0.0 for s in sets], dtype=np.float32)


def _page_slices(page: np.ndarray) -> dict[int, slice]:
    starts = np.flatnonzero(np.r_[True, page[1:] != page[:-1]])
    ends = np.r_[starts[1:], len(page)]
    return {int(page[a]): slice(int(a), int(b)) for a, b in zip(starts, ends)}


class _Net:
    """The torch twin of ``model.BlockModel`` (same layers, same context)."""

    def __init__(self, n_in: int, hidden, context_layers: int, dropout: float = 0.0):
        import torch

        self.dropout = dropout
        self.training = False

        sizes = [n_in] + list(hidden)
        self.layers = []
        for i in range(len(hidden)):
            d_in = sizes[i] * (CONTEXT_PARTS if 0 < i <= context_layers else 1)
            self.layers.append(torch.nn.Linear(d_in, sizes[i + 1]))
        d_in = sizes[-1] * (CONTEXT_PARTS if len(hidden) <= context_layers else 1)
        self.layers.append(torch.nn.Linear(d_in, 1))
        self.context_layers = context_layers
        self.params = [p for m in self.layers for p in m.parameters()]

    def forward(self, x, page, groups):
        import torch

        n = x.shape[0]
        same = {}
        idx = torch.arange(n)
        for s in SHIFTS:
            j = (idx + s).clamp(0, n - 1)
            same[s] = (j, ((page[j] == page) & (idx + s >= 0) & (idx + s < n)).float()[:, None])
        inv = []
        for k in range(groups.shape[1]):
            _, iv, cnt = torch.unique(groups[:, k], return_inverse=True, return_counts=True)
            inv.append((iv, cnt.float()[:, None]))
        _, piv, pcnt = torch.unique(page, return_inverse=True, return_counts=True)
        inv.append((piv, pcnt.float()[:, None]))
        h = x
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if 0 < i <= self.context_layers:
                parts = [h] + [h[j] * m for j, m in same.values()]
                for iv, cnt in inv:
                    sums = torch.zeros((cnt.shape[0], h.shape[1])).index_add_(0, iv, h)
                    parts.append((sums / cnt)[iv])
                page_max = torch.zeros((pcnt.shape[0], h.shape[1])).scatter_reduce(
                    0, piv[:, None].expand(-1, h.shape[1]), h, "amax", include_self=False)
                parts.append(page_max[piv])
                h = torch.cat(parts, dim=1)
            if self.training and self.dropout > 0:
                h = torch.nn.functional.dropout(h, self.dropout, training=True)
            h = layer(h)
            if i < last:
                h = torch.relu(h)
        return h[:, 0]


def train_net(ds: Dataset, pages: np.ndarray, hidden=(64, 64, 32), epochs: int = 8,
              seed: int = 0, pages_per_batch: int = 16, lr: float = 2e-3, weight_decay: float = 0.05,
              dropout: float = 0.0, balance_sets: bool = True) -> BlockModel:
    """Train on the blocks of the given page indices (``balance_sets``: every set weighs the same in the loss,
    ``set_factors``; else every page does)."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    slices = _page_slices(ds.page)
    pages = np.array([p for p in pages if int(p) in slices])
    rows = np.concatenate([np.arange(slices[int(p)].start, slices[int(p)].stop) for p in pages])
    mean = ds.x[rows].mean(axis=0)
    scale = ds.x[rows].std(axis=0)
    scale = np.where(scale < 1e-6, 1.0, scale).astype(np.float32)
    xt = torch.from_numpy(((ds.x - mean) / scale).astype(np.float32))
    yt = torch.from_numpy(ds.y.astype(np.float32))
    w = sample_weights(ds, np.arange(len(ds.y)))
    if balance_sets:
        w = w * set_factors(ds, pages)[ds.page]
    wt = torch.from_numpy((w / w[rows].mean()).astype(np.float32))
    pt = torch.from_numpy(ds.page)
    # container ids made unique across pages
    gt = torch.from_numpy(ds.groups + (ds.page[:, None] << 32))
    net = _Net(ds.x.shape[1], hidden, len(hidden) - 1, dropout)
    net.training = True
    opt = torch.optim.AdamW(net.params, lr=lr, weight_decay=weight_decay)
    n_batches = (len(pages) + pages_per_batch - 1) // pages_per_batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * n_batches)
    rng = np.random.default_rng(seed)
    loss_fn = torch.nn.BCEWithLogitsLoss(reduction="none")
    for _ in range(epochs):
        order = rng.permutation(pages)
        for s in range(0, len(order), pages_per_batch):
            b = torch.from_numpy(np.concatenate([np.arange(slices[int(p)].start, slices[int(p)].stop)
                                                 for p in order[s:s + pages_per_batch]]))
            out = net.forward(xt[b], pt[b], gt[b])
            loss = (loss_fn(out, yt[b]) * wt[b]).sum() / pages_per_batch
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return BlockModel(mean.astype(np.float32), scale, [m.weight.detach().numpy().T.copy() for m in net.layers],
                      [m.bias.detach().numpy().copy() for m in net.layers], 0.5, {})


def predict_pages(model: BlockModel, ds: Dataset, pages) -> np.ndarray:
    """Block probabilities (zeros outside ``pages``)."""
    slices = _page_slices(ds.page)
    prob = np.zeros(len(ds.y), dtype=np.float32)
    for p in pages:
        sl = slices.get(int(p))
        if sl is not None:
            prob[sl] = model.predict(ds.x[sl], ds.groups[sl])
    return prob


def page_texts(ds: Dataset, prob: np.ndarray, threshold: float) -> dict[int, str]:
    """Output text per page index from block probabilities (the stage's own assembly, its fallback to the
    rules engine included)."""
    from curate.extract.blocks import extract_blocks, page_text
    from curate.extract.features import chrome_blocks, link_columns, place_columns
    from curate.extract.strip import strip_html

    by_page: dict[int, list[int]] = defaultdict(list)
    for i, p in enumerate(ds.page):
        by_page[int(p)].append(i)
    out = {}
    for p, idx in by_page.items():
        out[p] = page_text([ds.texts[i] for i in idx], [ds.tags[i] for i in idx], ds.groups[idx], prob[idx],
                           threshold, lambda: strip_html(ds.pages[p].html), links=link_columns(ds.x[idx]),
                           tree=(ds.owner[idx], ds.parents[p]), chrome=chrome_blocks(ds.x[idx]),
                           places=place_columns(ds.x[idx]))
    for p, page in enumerate(ds.pages):
        if p not in out:  # no blocks: the stage's own fallback (extract_blocks), so CV scores what it outputs
            out[p] = extract_blocks(page.html)
    return out


def scores(ds: Dataset, texts: dict[int, str]) -> dict[str, float]:
    """Mean word F1 per page type and overall (a page without blocks scores as empty output)."""
    by_type: dict[str, list[float]] = defaultdict(list)
    for i, p in enumerate(ds.pages):
        f = word_f1(texts.get(i, ""), p.gold)
        by_type[p.page_type].append(f)
        by_type["all"].append(f)
    return {k: float(np.mean(v)) for k, v in sorted(by_type.items())}


def folds_of(groups: list[str], k: int, seed: int) -> np.ndarray:
    """Fold per page: the distinct groups (``Page.group``) dealt to ``k`` folds in a seeded shuffled order,
    so that the pages of one group (one site) share a fold."""
    names = sorted(set(groups))
    order = np.random.default_rng(seed).permutation(len(names))
    fold_of = {names[j]: i % k for i, j in enumerate(order.tolist())}
    return np.array([fold_of[g] for g in groups], dtype=np.int64)


def set_of(page: Page) -> str:
    """The set a page came from (the gold file's name, ``page_group``'s prefix; "" when it has no group)."""
    return page.group.split(":", 1)[0] if page.group else ""


def groups_of(pages: list[Page]) -> list[str]:
    return [p.group or p.id for p in pages]


def cross_validate(ds: Dataset, k: int, seed: int, log=print, train_seed: int | None = None,
                   **train_kw) -> np.ndarray:
    """Out-of-fold block probabilities: each page predicted by the model trained on the other folds (folds
    by group: ``folds_of``, dealt with ``seed``; the models trained with ``train_seed``, default ``seed``:
    other training seeds on the same folds show how much the figures move with the seed alone)."""
    fold = folds_of(groups_of(ds.pages), k, seed)
    prob = np.zeros(len(ds.y), dtype=np.float32)
    for f in range(k):
        tr, te = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        t0 = time.perf_counter()
        m = train_net(ds, tr, seed=seed if train_seed is None else train_seed, **train_kw)
        prob += predict_pages(m, ds, te)
        log(f"  fold {f + 1}/{k}: trained on {len(tr)} pages in {time.perf_counter() - t0:.0f} s")
    return prob


def balanced_f1(ds: Dataset, texts: dict[int, str]) -> float:
    """The mean over sets (``set_of``) of each set's mean word F1: every set counts the same."""
    by_set: dict[str, list[float]] = defaultdict(list)
    for i, p in enumerate(ds.pages):
        by_set[set_of(p)].append(word_f1(texts.get(i, ""), p.gold))
    return float(np.mean([np.mean(v) for v in by_set.values()]))


def best_threshold(ds: Dataset, prob: np.ndarray, balance_sets: bool = True) -> tuple[float, float]:
    """The keep threshold (0.2 ... 0.7) with the best F1 of ``prob`` (``balanced_f1``, or over all pages)."""
    best = (0.5, -1.0)
    for t in np.arange(0.2, 0.71, 0.05):
        texts = page_texts(ds, prob, float(t))
        f = balanced_f1(ds, texts) if balance_sets else scores(ds, texts)["all"]
        if f > best[1]:
            best = (round(float(t), 2), f)
    return best


def format_scores(name: str, s: dict[str, float]) -> str:
    return f"{name:<28}" + "  ".join(f"{k} {v:.3f}" for k, v in s.items())


def write_atomic(path: Path, text: str) -> None:
    from curate.shards import atomic_path

    with atomic_path(path) as tmp:  # (its temp file is removed when the rename fails: a folder at ``path``)
        Path(tmp).write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m curate.extract.training.train", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    from curate.commands.extractor import add_train_arguments

    add_train_arguments(ap)
    return run(ap.parse_args(argv))


def run(a) -> int:
    """Train and write the model as the parsed flags ``a`` say (``curate extractor train``)."""
    if len(a.warc) != len(a.gold):
        raise SystemExit(f"curate extractor train: {len(a.warc)} --warc but {len(a.gold)} --gold: give one --gold "
                         f"per --warc, in the same order")
    from curate.commands.extractor import train_flag_problem

    problem = train_flag_problem(a)
    if problem:
        print(f"curate extractor train: error: {problem}", file=sys.stderr)
        return 2
    hidden = tuple(int(h) for h in a.hidden.split(",") if h.strip())
    from curate.commands.extractor import DEFAULT_MODEL

    if os.path.realpath(a.out) == os.path.realpath(DEFAULT_MODEL):
        print(f"--out is the shipped model ({DEFAULT_MODEL}): every extract stage without model = path will load the "
              "new one")
    t0 = time.perf_counter()
    try:
        pages = load_sets(a.warc, a.gold, a.limit)
    except (OSError, ValueError) as e:
        print(f"curate extractor train: error: {e}", file=sys.stderr)
        return 2
    sites = len(set(groups_of(pages)))
    print(f"{len(pages)} pages with gold text ({sites} sites)")
    if a.folds > sites:  # a fold is a set of sites: more folds than sites leaves folds empty
        print(f"curate extractor train: error: --folds {a.folds}: more than the {sites} sites the pages come "
              f"from (a site's pages share a fold); give at most {sites}", file=sys.stderr)
        return 2
    try:
        ds = build(pages)
    except ValueError as e:
        print(f"curate extractor train: error: {e}", file=sys.stderr)
        return 2
    print(f"{len(ds.y)} blocks, {ds.x.shape[1]} features ({time.perf_counter() - t0:.0f} s)")
    problem = label_problem(ds, a.gold)
    if problem:
        print(f"curate extractor train: error: {problem}; no model written", file=sys.stderr)
        return 2
    report: dict = {"pages": len(pages), "blocks": int(len(ds.y)), "folds": a.folds, "seed": a.seed,
                    "hidden": list(hidden), "epochs": a.epochs, "weight_decay": a.weight_decay, "dropout": a.dropout,
                    "balance_sets": not a.weigh_pages_equally}
    train_kw = dict(hidden=hidden, epochs=a.epochs, weight_decay=a.weight_decay, dropout=a.dropout,
                    balance_sets=not a.weigh_pages_equally)
    threshold = a.threshold or 0.5
    if a.folds > 1:
        prob = cross_validate(ds, a.folds, a.seed, **train_kw)
        if not a.threshold:
            threshold, _ = best_threshold(ds, prob, not a.weigh_pages_equally)
        cv_texts = page_texts(ds, prob, threshold)
        cv = scores(ds, cv_texts)
        print(format_scores(f"cross-validated (t={threshold})", cv))
        if a.oof:
            write_atomic(Path(a.oof), "".join(json.dumps({"id": p.id, "set": set_of(p), "page_type": p.page_type,
                                                          "text": cv_texts.get(i, "")}) + "\n"
                                              for i, p in enumerate(pages)))
        report["cv"] = cv
    all_pages = np.arange(len(pages))
    model = train_net(ds, all_pages, seed=a.seed, **train_kw)
    model.threshold = threshold
    ins = scores(ds, page_texts(ds, predict_pages(model, ds, all_pages), threshold))
    print(format_scores("in-sample", ins))
    report["in_sample"] = ins
    report["threshold"] = threshold
    if not all(np.isfinite(w).all() for w in [*model.weights, *model.biases, model.mean, model.scale]):
        print(f"curate extractor train: error: training diverged (weights that are not finite numbers); {a.out} "
              "not written", file=sys.stderr)
        return 1
    model.meta = {"trained_on": f"{len(pages)} pages of " + " + ".join(Path(g).name for g in a.gold),
                  "report": report}
    write_atomic(Path(a.out), model.to_json())
    if a.report:
        write_atomic(Path(a.report), json.dumps(report, indent=1))
    print(f"wrote {a.out} ({os.path.getsize(a.out) / 1024:.0f} KiB) in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
