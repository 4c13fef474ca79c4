"""The worst per-document cost found over hostile inputs: CPU seconds per page through ``extract`` and per text
through the heuristic filters and ``normalize``, with the bounds in place, beside what the same shapes cost unbounded.

Inputs: the page shapes and texts of ``tests/hostile/cost_inputs.py`` (deep nesting of any element, distinct
unclosed formatting tags, tens of thousands of attributes; runs of CJK punctuation, emoji, marks), and every
document the readers make of the hostile reader corpus (``tests/hostile/make_corpus.py``, built into a
temporary folder). Unbounded costs (lexbor on the raw page, spaCy's tokenizer on the raw text) are measured in
a child process with a CPU limit (``--raw-limit``, seconds; "> N" when it ran out; lexbor also with 4 GB of
address space).

    python benchmarks/worst_case_cost.py               # about a minute or two
    python benchmarks/worst_case_cost.py --no-corpus   # the shapes and texts only
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "hostile")]

import cost_inputs  # noqa: E402

from curate.extract.stage import Extract  # noqa: E402
from curate.stages.c4_quality import C4Quality  # noqa: E402
from curate.stages.fineweb_quality import FineWebQuality  # noqa: E402
from curate.stages.gopher_quality import GopherQuality  # noqa: E402
from curate.stages.gopher_repetition import GopherRepetition  # noqa: E402

from curate.stages.normalize import Normalize  # noqa: E402

FILTERS = (GopherQuality, GopherRepetition, C4Quality, FineWebQuality)


class _Normalize(Normalize):
    """``normalize`` (ftfy, NFC, whitespace) on one text, called like a filter's ``check``."""

    def check(self, text: str, _context) -> None:
        self.apply(pa.table({"id": ["t"], "text": [text]}))


def _c4_regex(name: str) -> C4Quality:
    """C4's rules with Quarry's regex sentence splitter (``words = "regex"``, sentences not lines)."""
    return C4Quality(name, C4Quality.Params(words="regex", split_paragraph=False))


def _c4_spacy(name: str) -> C4Quality:
    """C4's rules on spaCy's sentences (``split_paragraph = false``, DataTrove's sentence mode)."""
    return C4Quality(name, C4Quality.Params(split_paragraph=False))


FILTER_COLUMNS = [(cls.__name__, cls) for cls in FILTERS] + [("C4 regex sentences", _c4_regex),
                                                             ("C4 spaCy sentences", _c4_spacy),
                                                             ("Normalize", _Normalize)]


def _cpu(fn, *args) -> float:
    start = time.process_time()
    fn(*args)
    return time.process_time() - start


def _pages_table(pages: list[str]) -> pa.Table:
    n = len(pages)
    return pa.table({"id": [str(i) for i in range(n)], "url": [""] * n, "content_type": ["text/html"] * n,
                     "text": pages})


def _raw(code: str, limit: int, memory: int = 0) -> str:
    """CPU seconds of ``code`` in a child limited to ``limit`` CPU seconds (and ``memory`` bytes of address
    space): "> limit" when it ran out of time, "killed (memory)" when out of memory."""
    def cap():
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    wrapped = ("import time,sys; sys.path.insert(0, %r)\nimport cost_inputs\n" % str(ROOT / "tests" / "hostile")
               + code + "\nstart = time.process_time(); run(); print(time.process_time() - start)")
    r = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True, preexec_fn=cap)
    if r.returncode == 0:
        return f"{float(r.stdout.split()[-1]):.2f}"
    if r.returncode in (-24, -9, 152, 137):  # SIGXCPU / SIGKILL: the CPU limit
        return f"> {limit}"
    if any(s in r.stderr for s in ("MemoryError", "bad_alloc", "SelectolaxError")) or r.returncode in (-6, 134):
        return "out of memory"
    return f"failed ({r.stderr.strip().splitlines()[-1][:40] if r.stderr.strip() else r.returncode})"


def pages(raw_limit: int) -> list[tuple[str, float]]:
    stage = Extract("extract", Extract.Params(timeout_s=60))
    stage.apply(_pages_table(["<html><body><p>warm up text for the engine</p></body></html>"]))
    rows = []
    print(f"{'page shape':34} {'KB':>6} {'extract s':>10}  {'lexbor on the raw page (s)':>27}"
          f"  {'stripping regex (s)':>20}")
    for name, make in sorted(cost_inputs.HTML.items()):
        page = make()
        cost = _cpu(stage.apply, _pages_table([page]))
        raw = _raw("from selectolax.lexbor import LexborHTMLParser\n"
                   f"page = cost_inputs.HTML[{name!r}]().encode()\n"
                   "def run(): LexborHTMLParser(page)", raw_limit, 4 << 30) if raw_limit else "-"
        # the regular expression the stripping scans give the output of (strip.strip_regex), run on its own
        regex = _raw("from curate.extract.strip import strip_regex\n"
                     f"page = cost_inputs.HTML[{name!r}]()\n"
                     "def run(): strip_regex(page)", raw_limit) if raw_limit else "-"
        print(f"{name:34} {len(page) // 1024:6d} {cost:10.3f}  {raw:>27}  {regex:>20}", flush=True)
        rows.append(("page " + name, cost))
    return rows


def texts(raw_limit: int) -> list[tuple[str, float]]:
    rows = []
    print(f"\n{'text shape':32} {'chars':>8} " + " ".join(f"{n[:18]:>18}" for n, _ in FILTER_COLUMNS)
          + "  spaCy on the raw text (s)")
    for name, make in sorted(cost_inputs.TEXT.items()):
        text = make()
        costs = [_cpu(make_filter("x").check, text, {}) for _, make_filter in FILTER_COLUMNS]
        raw = _raw("import spacy\nt = spacy.blank('en').tokenizer\n"
                   f"text = cost_inputs.TEXT[{name!r}]()\n"
                   "def run(): t(text)", raw_limit) if raw_limit else "-"
        print(f"{name:32} {len(text):8d} " + " ".join(f"{c:18.3f}" for c in costs) + f"  {raw:>28}", flush=True)
        rows += [(f"text {name} ({n})", c) for (n, _), c in zip(FILTER_COLUMNS, costs)]
    return rows


def corpus() -> list[tuple[str, float]]:
    """Every document the readers make of the hostile reader corpus, through extract (HTML) and the filters."""
    import make_corpus

    from curate import readers

    stage = Extract("extract", Extract.Params(timeout_s=60))
    filters = [cls("x") for cls in FILTERS]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        expected = make_corpus.build(Path(d))
        for rel, exp in sorted(expected.items()):
            path = str(Path(d) / rel)
            for item in readers.read_file(path, exp["format"]):
                if item[0] != "doc":
                    continue
                doc = item[1]
                text = doc.get("text") or ""
                if doc.get("content_type") == "text/html":
                    t = _pages_table([text])
                    cost = _cpu(stage.apply, t)
                    kept = stage.apply(t).kept
                    text = kept.column("text")[0].as_py() if kept.num_rows else ""
                else:
                    cost = 0.0
                cost += sum(_cpu(f.check, text, {}) for f in filters)
                rows.append((f"corpus {rel}: {doc.get('id', '')[:40]}", cost))
    rows.sort(key=lambda r: -r[1])
    print(f"\nhostile reader corpus: {len(rows)} documents; the costliest (extract + the four filters, CPU s):")
    for name, cost in rows[:5]:
        print(f"  {cost:8.3f}  {name}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-corpus", action="store_true", help="skip the hostile reader corpus")
    ap.add_argument("--raw-limit", type=int, default=20,
                    help="CPU seconds for each unbounded reference measurement (0: skip them; default 20)")
    args = ap.parse_args(argv)
    rows = pages(args.raw_limit) + texts(args.raw_limit)
    if not args.no_corpus:
        rows += corpus()
    worst = max(rows, key=lambda r: r[1])
    print(f"\nworst per-document cost found: {worst[1]:.3f} CPU s ({worst[0]}) over {len(rows)} measurements")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
