"""The docs work when copied: every example command in README.md, docs/*.md and the `--help` texts parses
with the real parsers and names only shipped files that exist (or, under out/demo/, what pipelines/demo.sh
makes); its pipeline's stages take the keys it gives them and its training config's keys exist. The stage
reference (docs/stages.md) is what `curate stages --markdown` prints; the snippets that read curated shards
with pyarrow, Polars and DuckDB run."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import io
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from curate.commands import stages as stages_command
from curate.stages import STAGES, stage_class
from tests.conftest import ROOT, SAMPLE

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
DEMO = (ROOT / "pipelines" / "demo.sh").read_text()
SHIPPED = ("pipelines/", "data_specs/", "pretrain/configs/", "benchmarks/", "tests/", "docs/")
# A command the docs show that curate/cli.py may not list yet: parsed with its module (a no-op once it is listed).
NEW_COMMANDS = {"stages": ("curate.commands.stages", "the stage reference")}


# --- gathering the examples ------------------------------------------------------------------------

def code_blocks(text: str, langs=("bash", "sh", "console")) -> list[str]:
    return [m.group(2) for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S) if m.group(1) in langs]


def command_lines(text: str) -> list[str]:
    """Lines of shell, backslash continuations joined, comments and prompts removed."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if words:
            out.append(shlex.join(words))
    return out


def doc_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for block in code_blocks(doc.read_text(encoding="utf-8")):
            found += [(doc.name, line) for line in command_lines(block)]
    return found


def help_texts() -> dict[str, str]:
    """`curate --help`, `pretrain --help` and every subcommand's (and sub-subcommand's) help, as printed."""
    texts = {}
    for prog in ("curate", "pretrain"):
        texts[prog] = _help(prog, [])
        for cmd in _commands(prog):
            texts[f"{prog} {cmd}"] = _help(prog, [cmd])
            for sub in _choices(texts[f"{prog} {cmd}"]):
                texts[f"{prog} {cmd} {sub}"] = _help(prog, [cmd, sub])
    return texts


def _choices(help_text: str) -> list[str]:
    usage = help_text.split("\n\n")[0]
    m = re.search(r"\{([\w,-]+)\} \.\.\.", usage)  # a subcommand's choices, not an option's
    return m.group(1).split(",") if m else []


def _help(prog: str, argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        _main(prog)(argv + ["--help"])
    return out.getvalue()


def help_commands() -> list[tuple[str, str]]:
    found = []
    for where, text in help_texts().items():
        lines = [ln for ln in text.splitlines() if re.match(r"\s+(curate|pretrain|torchrun|python)\b", ln)]
        found += [(f"{where} --help", line) for line in command_lines("\n".join(lines))]
    return found


# --- checking one command line ---------------------------------------------------------------------

def _main(prog: str):
    return importlib.import_module(f"{prog}.cli").main


def _commands(prog: str) -> dict:
    return importlib.import_module(f"{prog}.cli").COMMANDS


@pytest.fixture(autouse=True, scope="module")
def new_commands():
    """NEW_COMMANDS whose module exists, in curate's COMMANDS for this module's tests only."""
    commands = _commands("curate")
    added = [name for name, (module, _) in NEW_COMMANDS.items()
             if name not in commands and importlib.util.find_spec(module) is not None]
    commands.update({name: NEW_COMMANDS[name] for name in added})
    yield
    for name in added:
        del commands[name]


def _module_of(entry) -> str:
    return entry[0] if isinstance(entry, (tuple, list)) else entry


def parse_with_real_parser(prog: str, argv: list[str], monkeypatch) -> argparse.Namespace:
    """Run `prog argv` through its real dispatcher with every command's run() replaced: parsing only."""
    seen = []
    for entry in _commands(prog).values():
        monkeypatch.setattr(importlib.import_module(_module_of(entry)), "run", lambda args: seen.append(args) or 0)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            _main(prog)(argv)
        except SystemExit as e:
            if e.code == 0 and ("--help" in argv or "-h" in argv):  # an example of asking for help
                return None
            raise AssertionError(f"`{prog} {shlex.join(argv)}` does not parse: {err.getvalue().strip()}") from e
    return seen[0]


def split_program(words: list[str]) -> tuple[str | None, list[str]]:
    """(curate|pretrain, its arguments) for a line that runs one of them, else (None, [])."""
    for i, w in enumerate(words):
        if w in ("curate", "pretrain") and i == 0:
            return w, words[1:]
        if w == "-m" and i + 1 < len(words) and words[i + 1] in ("curate", "pretrain"):
            return words[i + 1], words[i + 2:]
    return None, []


def repo_paths(words: list[str]) -> list[str]:
    out = []
    for w in words:
        for part in w.split("=", 1)[-1:] if w.startswith("--") else [w]:
            if part.startswith(SHIPPED) or part.startswith("out/"):
                out.append(part.rstrip("/"))
    return out


def demo_makes(path: str) -> bool:
    """`out/demo/X` is what pipelines/demo.sh writes as "$OUT/X" (or a file inside it)."""
    made = {m.group(1) for m in re.finditer(r'"\$OUT/([^"$]+)"', DEMO)}
    made |= {f"{m}.bin" for m in made} | {f"{m}.idx" for m in made}
    rel = path[len("out/demo/"):]
    return any(rel == m or rel.startswith(m + "/") for m in made)


def check_paths(words: list[str], where: str) -> None:
    for p in repo_paths(words):
        if p.startswith("out/demo/"):
            assert demo_makes(p), f"{where}: {p} is not made by pipelines/demo.sh"
        elif p.startswith(SHIPPED):
            assert list(ROOT.glob(p)) if "*" in p else (ROOT / p).exists(), f"{where}: {p} does not exist"


def check_command(where: str, line: str, monkeypatch) -> None:
    words = shlex.split(line)
    check_paths(words, where)
    if words[0] == "make":
        targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M)
        assert all(t in targets for t in words[1:]), f"{where}: no make target in {line}"
        return
    script = next((w for w in words if w.startswith("benchmarks/") and w.endswith(".py")), None)
    if script:
        source = (ROOT / script).read_text()
        for flag in (w.split("=")[0] for w in words if w.startswith("--")):
            assert f'"{flag}"' in source, f"{where}: {script} has no {flag}"
        return
    prog, argv = split_program(words)
    if prog is None:
        return
    args = parse_with_real_parser(prog, argv, monkeypatch)
    if args is None:
        return
    if prog == "curate" and argv[0] == "stages":  # cheap enough to run for real
        with contextlib.redirect_stdout(io.StringIO()):
            assert stages_command.run(args) == 0, f"{where}: {line} failed"
    if prog == "curate" and argv[0] == "run" and args.pipeline.startswith("pipelines/"):
        check_stage_keys(ROOT / args.pipeline)
    if prog == "pretrain" and argv[0] == "train":
        from pretrain.config import load_config
        config = ROOT / args.config if args.config and (ROOT / args.config).is_file() else None
        load_config(config, args.overrides)


def check_stage_keys(pipeline: Path) -> None:
    """Every stage of a shipped pipeline exists and takes the keys the file gives it (its model files may be
    made by the demo first, so the pipeline is not loaded whole)."""
    check_stage_tables(tomllib.loads(pipeline.read_text()), pipeline.name)


def check_stage_tables(raw: dict, where: str) -> None:
    for table in raw.get("stages", []):
        assert table["type"] in STAGES, f"{where}: no stage type {table['type']!r}"
        keys = {f.name for f in dataclasses.fields(stage_class(table["type"]).Params)}
        assert set(table) - {"type", "name"} <= keys, f"{where}: unknown keys in {table}"


# --- the tests -------------------------------------------------------------------------------------

def test_examples_were_found():
    lines = [line for _, line in doc_commands()]
    for prog in ("curate run", "curate stats", "curate stages", "pretrain train", "torchrun"):
        assert any(line.startswith(prog) for line in lines), f"no `{prog}` example in the docs"


@pytest.mark.parametrize("where, line", doc_commands(), ids=lambda v: v[:70])
def test_doc_example_parses_and_names_what_exists(where, line, monkeypatch):
    check_command(where, line, monkeypatch)


def test_help_examples_parse_and_name_what_exists(monkeypatch):
    found = help_commands()
    assert any(where == "curate --help" for where, _ in found) and any(where == "pretrain --help" for where, _ in found)
    problems = []
    for where, line in found:
        try:
            check_command(where, line, monkeypatch)
        except AssertionError as e:
            problems.append(str(e).splitlines()[0])
    assert not problems, "\n".join(dict.fromkeys(problems))


def test_help_texts_name_only_files_that_exist():
    missing = [f"`{where} --help` names {path}" for where, text in help_texts().items()
               for path in re.findall(r"\b(?:pipelines|data_specs|pretrain/configs)/[\w./-]+\.toml\b", text)
               if not (ROOT / path).is_file()]
    assert not missing, "files that do not exist:\n" + "\n".join(dict.fromkeys(missing))


def test_toml_examples_name_real_stages_and_keys():
    from curate.pipeline import PIPELINE_KEYS
    for doc in DOCS:
        for block in code_blocks(doc.read_text(encoding="utf-8"), langs=("toml",)):
            raw = tomllib.loads(block)
            check_stage_tables(raw, doc.name)
            assert set(raw.get("pipeline", {})) <= set(PIPELINE_KEYS), f"{doc.name}: {raw['pipeline']}"


def test_docs_name_only_shipped_files_that_exist():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for path in re.findall(r"`((?:pipelines|data_specs|pretrain/configs)/[\w.-]+\.(?:toml|sh))`", text):
            assert (ROOT / path).is_file(), f"{doc.name} names {path}, which does not exist"


def test_docs_name_only_code_paths_that_exist():
    """Backticked paths into the code (`curate/...`, `pretrain/...`) name files and folders that exist."""
    code_path = re.compile(r"`((?:curate|pretrain|tests|benchmarks)/[\w./-]*)`(?! \(planned)")
    missing = [f"{doc.name}: {path}" for doc in DOCS for path in code_path.findall(doc.read_text(encoding="utf-8"))
               if not (ROOT / path.rstrip("/")).exists()]
    assert not missing, "stale paths:\n" + "\n".join(dict.fromkeys(missing))


def test_web_pipeline_comment_names_the_default_engine():
    engine = stage_class("extract").Params().engine
    line = next(ln for ln in (ROOT / "pipelines" / "web.toml").read_text().splitlines() if '"extract"' in ln)
    assert engine in line, f"pipelines/web.toml's extract line does not name the default engine {engine}"


# --- the stage reference ---------------------------------------------------------------------------

def test_stage_reference_is_in_sync():
    generated = stages_command.markdown(list(STAGES))
    assert (ROOT / "docs" / "stages.md").read_text(encoding="utf-8") == generated, (
        "docs/stages.md is stale: regenerate it with `curate stages --markdown > docs/stages.md`")


def test_every_stage_key_has_a_meaning():
    missing = [f"{t}.{k.name}" for t in STAGES for k in stages_command.keys(t) if not k.meaning]
    assert not missing, "keys without a `# comment` on their Params field line: " + ", ".join(missing)


def test_config_reference_is_in_sync_and_complete(capsys):
    from pretrain.cli import main as pretrain_main
    from pretrain.commands import config as config_command
    from pretrain.config import TABLE_CLASSES

    generated = config_command.markdown(list(TABLE_CLASSES))
    assert (ROOT / "docs" / "config.md").read_text(encoding="utf-8") == generated, (
        "docs/config.md is stale: regenerate it with `pretrain config --markdown > docs/config.md`")
    from curate.field_docs import describe
    missing = [f"{t}.{k.name}" for t, cls in TABLE_CLASSES.items() for k in describe(cls) if not k.meaning]
    assert not missing, "config keys without a `# comment` on their field line: " + ", ".join(missing)
    assert pretrain_main(["config", "train"]) == 0
    out = capsys.readouterr().out
    assert "global_batch (int, default 8)" in out and "[model]" not in out
    assert pretrain_main(["config", "nosuch"]) == 2


def test_every_stage_lists_its_reasons():
    for t in STAGES:
        own = [code for code, _ in stages_command.reasons(t) if code != "stage_error"]
        assert own, f"{t}: no REASONS"


def run_stages(argv: list[str], capsys) -> tuple[int, str, str]:
    p = argparse.ArgumentParser()
    stages_command.add_arguments(p)
    rc = stages_command.run(p.parse_args(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_stages_command(capsys):
    rc, out, _ = run_stages([], capsys)
    assert rc == 0 and all(re.search(rf"^{t}\s", out, re.M) for t in STAGES)
    rc, out, _ = run_stages(["gopher_quality"], capsys)
    assert rc == 0 and "min_alpha_words_ratio (float, default 0.8)" in out and "gopher_alpha_words" in out
    rc, _, err = run_stages(["no_such_stage"], capsys)
    assert rc == 2 and "no_such_stage" in err and "gopher_quality" in err
    rc, out, _ = run_stages(["read"], capsys)
    assert rc == 0 and "truncated_gzip" in out
    rc, out, _ = run_stages(["langid", "--markdown"], capsys)
    assert rc == 0 and "| `threshold` | `float` | `0.65` |" in out


def test_every_pretrain_config_key_is_in_docs():
    import dataclasses as dc
    from pretrain import config
    rows = {line.split("|")[1].strip(): line for line in (ROOT / "docs" / "pretrain.md").read_text().splitlines()
            if line.startswith("| `[")}
    for table in dc.fields(config.Config):
        row = rows.get(f"`[{table.name}]`", "")
        keys = dc.fields(type(getattr(config.Config(), table.name)))
        missing = [f.name for f in keys if f"`{f.name}`" not in row]
        assert not missing, f"docs/pretrain.md's [{table.name}] row lacks {missing}"


# --- reading curated shards: the snippets in the docs run ------------------------------------------

PIPELINE = """
[pipeline]
name = "docs"
output = "{out}"
workers = 1
shard_rows = 40
format = "{fmt}"

[[sources]]
path = "{sample}"

[[stages]]
type = "langid"
languages = []
tag_only = true
"""


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    """A small curated folder per format, as `curate run` writes it."""
    folders = {}
    for fmt in ("arrow", "parquet"):
        tmp = tmp_path_factory.mktemp(f"docs_{fmt}")
        toml = tmp / "pipeline.toml"
        toml.write_text(PIPELINE.format(out=tmp / "out", fmt=fmt, sample=SAMPLE / "fortunes.jsonl.gz"))
        proc = subprocess.run([sys.executable, "-m", "curate", "run", str(toml), "--quiet"], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        folders[fmt] = tmp / "out"
    return folders


def python_snippets() -> list[tuple[str, str]]:
    """The docs' Python blocks that read a curated folder (they set OUT = "out/...")."""
    found = []
    for doc in DOCS:
        for block in code_blocks(doc.read_text(encoding="utf-8"), langs=("python",)):
            if re.search(r'^OUT = "out/[^"]+"', block, re.M):
                found.append((doc.name, block))
    return found


def test_reading_snippets_are_in_the_docs():
    snippets = "\n".join(block for _, block in python_snippets())
    for needle in ("pyarrow.dataset", "scan_ipc", "duckdb", ".parquet"):
        assert needle in snippets, f"no snippet shows {needle}"


@pytest.mark.parametrize("where, block", python_snippets())
def test_reading_snippet_runs(where, block, curated):
    fmt = "parquet" if ".parquet" in block else "arrow"
    out = curated[fmt]
    rows = sum(s["rows"] for s in json.loads((out / "manifest.json").read_text())["shards"])
    code = re.sub(r'^OUT = "out/[^"]+"', f"OUT = {str(out)!r}", block, flags=re.M)
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(code, where, "exec"), namespace)
    counts = [v for k, v in namespace.items() if k.endswith("rows") and isinstance(v, int)]
    assert counts and all(c == rows for c in counts), (where, counts, rows, printed.getvalue())


def test_duckdb_needs_the_dataset_for_arrow_shards(curated):
    """What the docs say: DuckDB alone does not read Arrow IPC files (its `arrow` extension is a download)."""
    import duckdb
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    with pytest.raises(duckdb.Error):
        con.sql(f"select count(*) from '{curated['arrow']}/data/*.arrow'").fetchall()
