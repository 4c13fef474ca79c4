"""`pretrain report`: funnel.png, loss.png and index.md from curation stats and the trainer's metrics log."""
from __future__ import annotations

import json
import math

import pytest
from PIL import Image

from pretrain.cli import main
from pretrain.report import ReportError, make_report, read_metrics

# single-process checkpoint load/save: DCP warns that no process group exists
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

WEB = {"pipeline": "web", "stages": [
    {"name": "read", "in": 1000, "kept": 950, "dropped": {"empty": 30, "not_html": 20}, "skipped": {"request": 7}},
    {"name": "langid", "in": 950, "kept": 700, "dropped": {"lang_de": 150, "low_confidence": 100}},
    {"name": "gopher_quality", "in": 700, "kept": 512, "dropped": {"too_short": 88, "symbol_ratio": 100}},
]}
BOOKS = {"pipeline": "books", "stages": [
    {"name": "read", "in": 426, "kept": 426, "dropped": {}},
    {"name": "exact_dedup", "in": 426, "kept": 411, "dropped": {"exact_duplicate": 15}},
]}


def write_stats(folder, stats):
    folder.mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps(stats))
    return folder


def write_metrics(folder, steps=40, eval_every=10, cut_last_line=False):
    """A made-up but plausible log: loss decays from 6 towards 3, validation every eval_every steps."""
    folder.mkdir(parents=True)
    lines = []
    for step in range(1, steps + 1):
        loss = 3.0 + 3.0 * math.exp(-step / 10)
        lines.append({"step": step, "loss": loss, "lr": 1e-3, "grad_norm": 0.5,
                      "tokens_per_s": 500.0 if step == 1 else 2000.0 + 10 * step, "mfu": 0.01 + step / 1e4})
        if step % eval_every == 0:
            lines.append({"step": step, "val_loss": loss + 0.25})
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    if cut_last_line:
        text += '{"step": 41, "loss": 2.9'
    (folder / "metrics.jsonl").write_text(text)
    return folder


def png_size(path):
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        return im.size


def test_report_files_and_numbers(tmp_path):
    web, books = write_stats(tmp_path / "web", WEB), write_stats(tmp_path / "books", BOOKS)
    logs = write_metrics(tmp_path / "logs", cut_last_line=True)
    out = make_report(tmp_path / "report", [web, books], logs)

    w2, h2 = png_size(out / "funnel.png")
    png_size(out / "loss.png")
    one = make_report(tmp_path / "report1", [books], logs)
    w1, h1 = png_size(one / "funnel.png")
    assert h2 > 1.5 * h1  # one panel per curated dataset

    md = (out / "index.md").read_text()
    assert "(funnel.png)" in md and "(loss.png)" in md
    # funnel tables: every stage with its counts and reasons
    assert "| langid | 950 | 700 | 250 | 73.7 | lang_de: 150, low_confidence: 100 |" in md
    assert "| gopher_quality | 700 | 512 | 188 | 73.1 | symbol_ratio: 100, too_short: 88 |" in md
    assert "| exact_dedup | 426 | 411 | 15 | 96.5 | exact_duplicate: 15 |" in md
    assert "1,000 documents in, 512 kept (51.2%)" in md
    # final losses: step 40 (the cut last line is ignored), validation at step 40
    final = 3.0 + 3.0 * math.exp(-4)
    assert f"| final train loss | {final:.4f} |" in md
    assert f"| final validation loss | {final + 0.25:.4f} (step 40) |" in md
    assert "| steps | 40 |" in md
    # throughput: median after the first step: steps 2..40 -> 2000 + 10 * 21
    assert "| tokens/s (median) | 2,210 |" in md
    assert "| MFU (median) | 1.21% |" in md
    assert "## Sample" not in md


def test_report_without_validation(tmp_path):
    books = write_stats(tmp_path / "books", BOOKS)
    logs = write_metrics(tmp_path / "logs", steps=5, eval_every=100)
    out = make_report(tmp_path / "report", [books], logs)
    assert "| final validation loss | - |" in (out / "index.md").read_text()


def test_resumed_run_keeps_last_entry_per_step(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    rows = [{"step": 1, "loss": 5.0}, {"step": 2, "loss": 4.0}, {"step": 2, "loss": 4.5}, {"step": 3, "loss": 3.5}]
    (logs / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = make_report(tmp_path / "r", [write_stats(tmp_path / "b", BOOKS)], logs)
    md = (out / "index.md").read_text()
    assert "| final train loss | 3.5000 |" in md and "| tokens/s (median) | - |" in md


def test_errors_name_the_file(tmp_path, capsys):
    logs = write_metrics(tmp_path / "logs", steps=3)
    with pytest.raises(ReportError, match="stats.json"):
        make_report(tmp_path / "r", [tmp_path / "nope"], logs)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.jsonl").write_text('{"step": 1, "loss": 3}\nnot json\n{"step": 2, "loss": 2}\n')
    with pytest.raises(ReportError, match=r"metrics.jsonl:2"):
        read_metrics(bad)
    rc = main(["report", "--out", str(tmp_path / "r"), "--curated", str(tmp_path / "nope"), "--logs", str(logs)])
    assert rc == 2 and "stats.json" in capsys.readouterr().err
    for line in ('[1, 2]', '{"step": "x", "loss": 1}', '{"step": true}'):  # JSON, but not a metrics entry
        (bad / "metrics.jsonl").write_text(f'{{"step": 1, "loss": 3}}\n{line}\n{{"step": 2, "loss": 2}}\n')
        with pytest.raises(ReportError, match=r"metrics.jsonl:2: not a metrics entry"):
            read_metrics(bad)
    (bad / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 3}\n\xae\xff binary\n')  # was a bare decode error
    with pytest.raises(ReportError, match=r"bad/metrics.jsonl: not text"):
        read_metrics(bad)
    for content in (b"{bad", b"[1]", b'{"stages": [5]}', b"\xff"):
        damaged = tmp_path / "damaged"
        damaged.mkdir(exist_ok=True)
        (damaged / "stats.json").write_bytes(content)
        rc = main(["report", "--out", str(tmp_path / "r"), "--curated", str(damaged), "--logs", str(logs)])
        assert rc == 2 and "damaged/stats.json" in capsys.readouterr().err


def test_cli(tmp_path, capsys):
    web, books = write_stats(tmp_path / "web", WEB), write_stats(tmp_path / "books", BOOKS)
    logs = write_metrics(tmp_path / "logs")
    rc = main(["report", "--out", str(tmp_path / "r"), "--curated", str(web), str(books), "--logs", str(logs)])
    assert rc == 0
    assert "index.md" in capsys.readouterr().out
    for name in ("index.md", "funnel.png", "loss.png"):
        assert (tmp_path / "r" / name).stat().st_size > 0


def test_cli_on_a_trained_run_with_sample(tmp_path_factory, tmp_path, capsys):
    """The report of a real (tiny) `pretrain train` run: its metrics.jsonl and a greedy sample from its checkpoint."""
    from pretrain.generate import generate_text, load_for_generation
    from tests.test_export_hf import trained_checkpoint

    ckpt, logs = trained_checkpoint(tmp_path_factory, "gpt2")
    books = write_stats(tmp_path / "books", BOOKS)
    out = tmp_path / "r"
    assert main(["report", "--out", str(out), "--curated", str(books), "--logs", str(logs), "--checkpoint",
                 str(ckpt), "--generate-prompt", "Emma", "--max-tokens", "12"]) == 0
    rows = [json.loads(line) for line in (logs / "metrics.jsonl").read_text().splitlines()]
    md = (out / "index.md").read_text()
    assert f"| final train loss | {rows[-1]['loss']:.4f} |" in md
    last_val = [r for r in rows if "val_loss" in r][-1]
    assert f"| final validation loss | {last_val['val_loss']:.4f} (step {last_val['step']}) |" in md
    model, tok = load_for_generation(ckpt)
    sample = "Emma" + generate_text(model, tok, "Emma", 12, temperature=0.0)
    assert "## Sample" in md and f"```text\n{sample}\n```" in md
    png_size(out / "loss.png")
