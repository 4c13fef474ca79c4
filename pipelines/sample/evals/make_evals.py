"""Build the shipped evaluation files (prose.jsonl: bpb, cloze.jsonl: LAMBADA-style, choice.jsonl:
HellaSwag-style) from public-domain English text that the training sample does not hold.

Which text: the books of the source corpus (``english_prose.jsonl``: Austen novels, Shakespeare plays,
Bibles and commentaries, Botchan) of which ``pipelines/sample/prose.jsonl.gz`` holds no document at all
(a book is a novel or a play; each Bible, commentary and Botchan counts as one book). For the corpus as
shipped these are three Shakespeare plays: Hamlet, Love's Labour's Lost and The Tempest.
Each scene's blocks (a speech, a stage direction; blank-line separated) are split into three runs so
the three files share no text: the blocks that start in the first 30% of the scene's characters feed
prose.jsonl, those in the next 33% cloze.jsonl, the rest choice.jsonl. Any candidate sharing a 13-word
shingle (the ``decontaminate`` stage's normalization) with the sample's training text (prose, fortunes,
the WARCs' text with tags stripped) is dropped. Everything is deterministic (fixed seed).

Run from the repository root (the build is not needed at test time: the files are committed)::

    python pipelines/sample/evals/make_evals.py --source-dir ../shared/corpora/prose --out pipelines/sample/evals
"""
from __future__ import annotations

import argparse
import collections
import gzip
import html
import json
import os
import random
import re
import sys
from pathlib import Path

SEED = 20
NGRAM = 13
SHARES = (0.30, 0.63)  # scene split points: prose | cloze | choice
PROSE_MIN, PROSE_TARGET, PROSE_MAX = 1000, 1500, 4000  # characters per bpb passage
PROSE_COUNT, PROSE_BYTES = 60, 140_000
CLOZE_COUNT, CLOZE_MIN_WORDS, CLOZE_MAX_WORDS, COMMON_WORDS = 150, 60, 200, 150
CHOICE_COUNT, CHOICE_CONTEXT_MAX = 150, 300
WORD = re.compile(r"[A-Za-z]{3,}")
TARGET = re.compile(r"(?<= )([A-Za-z]{3,})(?=[.,;:!?])")  # a word after a space, before punctuation
DIRECTION = re.compile(r"\\?\[[^\]]*\]")  # "\[Reads]", "[Aside]"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z'\"])")


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def book_of(doc_id: str) -> str:
    """``austen/emma/3`` -> ``austen/emma``; ``shakespeare/hamlet/2`` -> ``shakespeare/hamlet``; ``kjv/7`` -> ``kjv``."""
    parts = doc_id.split("#")[0].split("/")
    return "/".join(parts[:2]) if parts[0] in ("austen", "shakespeare") else parts[0]


def held_out_documents(source: Path, sample_dir: Path) -> list[dict]:
    """The corpus documents of every book the training sample holds no part of, in corpus order."""
    seen = {book_of(d["id"]) for d in read_jsonl(sample_dir / "prose.jsonl.gz")}
    return [d for d in read_jsonl(source) if book_of(d["id"]) not in seen]


def training_texts(sample_dir: Path) -> list[str]:
    """The sample's training text: prose and fortunes documents, and the WARCs' text with tags stripped."""
    texts = [d["text"] for name in ("prose.jsonl.gz", "fortunes.jsonl.gz") for d in read_jsonl(sample_dir / name)]
    for warc in sorted(sample_dir.glob("*.warc.gz")):
        raw = gzip.decompress(warc.read_bytes()).decode("utf-8", errors="replace")
        texts.append(html.unescape(re.sub(r"<[^>]*>", " ", raw)))
    return texts


class Shingles:
    """13-word shingles of the training text, with the ``decontaminate`` stage's normalization."""

    def __init__(self, texts: list[str]):
        import numpy as np
        from curate.stages.minhash.shingles import shingle_sets

        self._np, self._sets = np, shingle_sets
        self.train = np.unique(shingle_sets(texts, NGRAM)[0])

    def overlapping(self, texts: list[str]) -> list[bool]:
        """For each text: does it share a shingle with the training text?"""
        if not texts:
            return []
        flat, offsets = self._sets(texts, NGRAM)
        pos = self._np.minimum(self._np.searchsorted(self.train, flat), len(self.train) - 1)
        hit = self.train[pos] == flat
        return [bool(hit[a:b].any()) for a, b in zip(offsets[:-1], offsets[1:])]


def blocks_of(text: str) -> list[str]:
    return [b.strip("\n") for b in re.split(r"\n\s*\n", text) if b.strip()]


def is_speech(block: str) -> bool:
    """A speech: a speaker line in capitals, then at least one line of text."""
    lines = block.split("\n")
    return len(lines) > 1 and lines[0].upper() == lines[0] and bool(re.search(r"[A-Z]", lines[0]))


def split_scene(text: str) -> tuple[list[str], list[str], list[str]]:
    """A scene's blocks in three consecutive runs: start in the first 30% / next 33% / last 37% of characters."""
    blocks, parts, pos = blocks_of(text), ([], [], []), 0
    total = sum(len(b) for b in blocks) or 1
    for b in blocks:
        share = pos / total
        parts[0 if share < SHARES[0] else 1 if share < SHARES[1] else 2].append(b)
        pos += len(b)
    return parts


# --- bpb -------------------------------------------------------------------------------------------

def prose_candidates(blocks: list[str]) -> list[str]:
    """Consecutive blocks joined by blank lines into passages of PROSE_MIN..PROSE_MAX characters."""
    pieces: list[str] = []
    for b in blocks:  # a block over PROSE_MAX is cut at line ends
        cur = ""
        for line in b.split("\n"):
            if cur and len(cur) + 1 + len(line) > PROSE_MAX:
                pieces.append(cur)
                cur = ""
            cur = f"{cur}\n{line}" if cur else line
        pieces.append(cur)
    out, cur = [], ""
    for p in pieces:
        if cur and len(cur) + 2 + len(p) > PROSE_MAX:
            out.append(cur)
            cur = ""
        cur = f"{cur}\n\n{p}" if cur else p
        if len(cur) >= PROSE_TARGET:
            out.append(cur)
            cur = ""
    out.append(cur)
    return [p for p in out if PROSE_MIN <= len(p) <= PROSE_MAX]


def pick_prose(candidates: list[str], rng: random.Random) -> list[dict]:
    chosen = sorted(rng.sample(range(len(candidates)), min(PROSE_COUNT, len(candidates))))
    out, size = [], 0
    for i in chosen:
        if size + len(candidates[i].encode()) <= PROSE_BYTES:
            out.append({"text": candidates[i]})
            size += len(candidates[i].encode())
    return out


# --- cloze -----------------------------------------------------------------------------------------

def cloze_candidates(blocks: list[str], common: set[str]) -> list[str]:
    """Disjoint passages of one run of blocks, each cut right after a target word (see ``cloze_target``)."""
    text = "\n\n".join(blocks)
    block_starts = [0] + [m.end() for m in re.finditer(r"\n\n", text)]
    line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    speech_lines = _speech_line_spans(text, blocks, block_starts)
    out, free_from = [], 0
    for m in TARGET.finditer(text):
        word, end = m.group(1), m.end(1)
        if word.lower() in common or not any(a <= m.start(1) < b for a, b in speech_lines):
            continue
        start = _context_start(text, m.start(1), free_from, block_starts, line_starts)
        if start is None:
            continue
        context = text[start:m.start(1)]
        if re.search(rf"(?<![A-Za-z]){word}(?![A-Za-z])", context):
            out.append(text[start:end])
            free_from = end
    return out


def _speech_line_spans(text: str, blocks: list[str], block_starts: list[int]) -> list[tuple[int, int]]:
    """Character spans of the text lines of speeches (not speaker lines, not stage directions)."""
    spans = []
    for b, s in zip(blocks, block_starts):
        if is_speech(b):
            spans.append((s + b.index("\n") + 1, s + len(b)))
    return spans


def _context_start(text, target_start, free_from, block_starts, line_starts):
    """The latest block start (else line start) >= free_from leaving CLOZE_MIN..MAX_WORDS words before the target."""
    for starts in (block_starts, line_starts):
        for s in reversed([s for s in starts if free_from <= s < target_start]):
            n = len(text[s:target_start].split())
            if n >= CLOZE_MIN_WORDS:
                if n <= CLOZE_MAX_WORDS:
                    return s
                break
    return None


# --- choice ----------------------------------------------------------------------------------------

def speech_sentences(blocks: list[str]) -> list[list[str]]:
    """Each speech's text on one line (single spaces, stage directions in brackets removed), split into
    sentences; a sentence in capitals (a letter's signature) is left out."""
    out = []
    for b in blocks:
        if is_speech(b):
            flat = " ".join(DIRECTION.sub(" ", b.split("\n", 1)[1]).split())
            out.append([s for s in SENTENCE_END.split(flat) if s and s.upper() != s])
    return out


def choice_candidates(speeches: list[list[str]]) -> list[tuple[int, str, str]]:
    """(speech index, context, ending): one or two sentences of a speech and its next sentence; disjoint."""
    out = []
    for k, sents in enumerate(speeches):
        i = 0
        while i + 1 < len(sents):
            two = i + 2 < len(sents) and len(sents[i]) + len(sents[i + 1]) + 1 <= CHOICE_CONTEXT_MAX
            context = " ".join(sents[i:i + 2]) if two else sents[i]
            ending = sents[i + 2] if two else sents[i + 1]
            if len(context) >= 40 and 20 <= len(ending) <= 200 and len(ending.split()) >= 4:
                out.append((k, context, ending))
            i += 3 if two else 2
    return out


def make_choice(speech: int, context: str, ending: str, pool: list[tuple[str, int]], rng: random.Random) -> dict | None:
    """Three distractors of similar length (within 30%, else the 10 nearest) from other speeches; label shuffled."""
    other = [s for s, k in pool if k != speech and s != ending]
    near = [s for s in other if abs(len(s) - len(ending)) <= 0.3 * len(ending)]
    if len(near) < 3:
        near = sorted(other, key=lambda s: abs(len(s) - len(ending)))[:10]
    wrong = rng.sample(near, 3)
    if len({ending, *wrong}) < 4:
        return None
    label = rng.randrange(4)
    choices = wrong[:label] + [ending] + wrong[label:]
    return {"context": context, "choices": choices, "label": label}


# --- the build -------------------------------------------------------------------------------------

def build(source: Path, sample_dir: Path) -> dict[str, list[dict]]:
    docs = held_out_documents(source, sample_dir)
    if not docs:
        raise SystemExit(f"no book of {source} is absent from {sample_dir}/prose.jsonl.gz: nothing held out")
    print(f"held-out books: {sorted({book_of(d['id']) for d in docs})} ({len(docs)} documents)", file=sys.stderr)
    shingles = Shingles(training_texts(sample_dir))
    runs = [split_scene(d["text"]) for d in docs]
    counts = collections.Counter(w.lower() for d in docs for w in WORD.findall(d["text"]))
    common = {w for w, _ in counts.most_common(COMMON_WORDS)}
    rng = random.Random(SEED)

    def clean(items, text_of, name):
        kept = [x for x, bad in zip(items, shingles.overlapping([text_of(x) for x in items])) if not bad]
        print(f"{name}: {len(items)} candidates, {len(items) - len(kept)} share a {NGRAM}-gram with the sample",
              file=sys.stderr)
        return kept

    prose = clean([p for r in runs for p in prose_candidates(r[0])], lambda p: p, "prose")
    cloze = clean([c for r in runs for c in cloze_candidates(r[1], common)], lambda c: c, "cloze")
    speeches = [s for r in runs for s in speech_sentences(r[2])]
    pairs = clean(choice_candidates(speeches), lambda p: f"{p[1]} {p[2]}", "choice")
    pool = [(s, k) for k, sents in enumerate(speeches) for s in sents if 20 <= len(s) <= 200 and len(s.split()) >= 4]
    pool = [x for x, bad in zip(pool, shingles.overlapping([s for s, _ in pool])) if not bad]
    cloze_pick = sorted(rng.sample(range(len(cloze)), min(CLOZE_COUNT, len(cloze))))
    choice_pick = sorted(rng.sample(range(len(pairs)), min(CHOICE_COUNT, len(pairs))))
    choice = [make_choice(*pairs[i], pool, rng) for i in choice_pick]
    return {"prose.jsonl": pick_prose(prose, rng), "cloze.jsonl": [{"text": cloze[i]} for i in cloze_pick],
            "choice.jsonl": [c for c in choice if c is not None]}


def write_jsonl(items: list[dict], path: Path) -> None:
    """Atomically: a temporary file beside the target, then a rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example: python pipelines/sample/evals/make_evals.py "
                                        "--source-dir ../shared/corpora/prose --out pipelines/sample/evals")
    ap.add_argument("--source-dir", type=Path, required=True, help="folder holding english_prose.jsonl[.gz]")
    ap.add_argument("--sample-dir", type=Path, default=Path("pipelines/sample"),
                    help="the training sample (prose.jsonl.gz, fortunes.jsonl.gz, *.warc.gz); default %(default)s")
    ap.add_argument("--out", type=Path, required=True, help="folder to write prose/cloze/choice.jsonl into")
    args = ap.parse_args(argv)
    source = next((p for p in (args.source_dir / "english_prose.jsonl", args.source_dir / "english_prose.jsonl.gz")
                   if p.is_file()), None)
    if source is None:
        print(f"error: no english_prose.jsonl[.gz] in {args.source_dir}: pass --source-dir the corpus's prose folder",
              file=sys.stderr)
        return 2
    if not (args.sample_dir / "prose.jsonl.gz").is_file():
        print(f"error: {args.sample_dir}/prose.jsonl.gz not found: run from the repository root or pass --sample-dir",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name, items in build(source, args.sample_dir).items():
        write_jsonl(items, args.out / name)
        print(f"{args.out / name}: {len(items)} items, {(args.out / name).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
