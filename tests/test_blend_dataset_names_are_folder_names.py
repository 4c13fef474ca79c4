"""A blend dataset's name is the name of its index cache folder (``CACHE/NAME/``): refused before anything is read
or built when it cannot be one (a 5,000-character name passed `blend inspect`, then `blend build`, training and an
ablation failed with "File name too long"), or when two names are one folder on a case-insensitive file system
(``a`` and ``A``; macOS, Windows). The same for an ablation's blend variants and the names it gives its curated
folders."""
from __future__ import annotations

import pytest

from pretrain.cli import main as pretrain_main
from pretrain.data.blend import build_blend_splits, cache_dir_problem, inspect_blend
from pretrain.data.blend_spec import BlendSpecError
from tests.test_blend import make_dataset, write_spec

MAX_DATASET_NAME = 64  # pretrain.data.blend_spec.MAX_DATASET_NAME: as a pipeline's stage names


@pytest.fixture
def tokens(tmp_path):
    make_dataset(tmp_path / "web", 60, 1)
    make_dataset(tmp_path / "books", 40, 2)
    return tmp_path


def _spec(tmp_path, name_a: str, name_b: str = "books"):
    return write_spec(tmp_path / "blend.toml", f'''[[datasets]]
name = "{name_a}"
prefix = "{tmp_path}/web"
weight = 1
[[datasets]]
name = "{name_b}"
prefix = "{tmp_path}/books"
weight = 1
''')


def _every_use(spec, cache):
    """What `blend inspect`, `blend build` (its cache check, then the build) and the trainer call."""
    yield lambda: inspect_blend(spec, 10_000)
    yield lambda: cache_dir_problem(spec, cache, (100, 0, 0))
    yield lambda: build_blend_splits(spec, 16, (100, 0, 0), 1, cache)


@pytest.mark.parametrize("name, message", [
    ("n" * 5000, "5000 characters"),
    ("n" * (MAX_DATASET_NAME + 1), f"{MAX_DATASET_NAME + 1} characters"),
    ("web\\n", "letters, digits"),  # a trailing newline passed the spec's name check ("$" matches before it)
])
def test_a_dataset_name_that_cannot_be_a_folder_is_refused_before_any_build(tokens, name, message):
    spec = _spec(tokens, name)
    cache = tokens / "cache"
    for use in _every_use(spec, cache):
        with pytest.raises(BlendSpecError, match=message) as e:
            use()
        assert len(str(e.value)) < 400  # not the 5,000-character name
    assert not cache.exists()


def test_a_name_of_the_longest_length_is_accepted(tokens):
    spec = _spec(tokens, "n" * MAX_DATASET_NAME)
    build_blend_splits(spec, 16, (100, 0, 0), 1, tokens / "cache")
    assert (tokens / "cache" / ("n" * MAX_DATASET_NAME)).is_dir()


@pytest.mark.parametrize("a, b", [("a", "A"), ("Web", "wEB"), ("Valid", "books")])
def test_names_differing_only_in_case_are_refused_naming_both(tokens, a, b):
    spec = _spec(tokens, a, b)
    for use in _every_use(spec, tokens / "cache"):
        with pytest.raises(BlendSpecError, match="differ only in case") as e:
            use()
        assert repr(a) in str(e.value) and (repr(b) in str(e.value) or "valid split" in str(e.value))


def test_megatron_string_names_differing_only_in_case_are_refused(tmp_path):
    for seed, (sub, name) in enumerate((("x", "web"), ("y", "Web"))):
        (tmp_path / sub).mkdir()
        make_dataset(tmp_path / sub / name, 30, seed)
    with pytest.raises(BlendSpecError, match="names 'web' and 'Web' differ only in case"):
        inspect_blend(f"0.5 {tmp_path}/x/web 0.5 {tmp_path}/y/Web", 1000)


def test_the_commands_refuse_them_with_exit_status_2(tokens, capsys):
    spec = _spec(tokens, "n" * 5000)
    assert pretrain_main(["blend", "inspect", str(spec), "--tokens", "1e5"]) == 2
    assert pretrain_main(["blend", "build", str(spec), "--seq-len", "16", "--samples", "100",
                          "--out", str(tokens / "cache")]) == 2
    err = capsys.readouterr().err
    assert err.count("must be at most 64") == 2 and "File name too long" not in err


# --- the ablation: blend variants and the names of its curated folders ----------------------------------------

def test_an_ablation_blend_variant_with_such_names_is_refused_at_spec_check(tokens):
    from curate.config import ConfigError
    from pretrain.ablate.spec import spec_from_dict

    (tokens / "ev.jsonl").write_text('{"text": "x"}\n')
    (tokens / "tok.model").write_bytes(b"")  # the spec check only asks that it exists
    for name_a, name_b, message in (("n" * 300, "books", "300 characters"), ("a", "A", "differ only in case")):
        blend = _spec(tokens, name_a, name_b)
        table = {"config": "pretrain/configs/proxy-tiny.toml", "tokens": 2048, "seeds": [1], "baseline": "x",
                 "tokenizer": str(tokens / "tok.model"),
                 "variants": [{"name": "x", "blend": str(blend)}, {"name": "y", "blend": str(blend)}],
                 "tasks": [{"name": "t", "kind": "bpb", "path": str(tokens / "ev.jsonl")}]}
        with pytest.raises(ConfigError, match=f"variant 'x': blend: .*{message}"):
            spec_from_dict(table, "spec.toml")


def test_an_ablation_names_its_curated_folders_as_a_blend_may_name_them():
    from pretrain.ablate.prepare import dataset_names
    from pretrain.ablate.spec import Variant
    from curate.file_kind import file_name_key
    from pretrain.data.blend_spec import _NAME_RE as DATASET_NAME_RE, MAX_DATASET_NAME as most

    assert most == MAX_DATASET_NAME
    folders = ["/d/Web", "/e/web", "/f/valid", "/g/" + "x" * 250, "/h/my web (2024)", "/i/.hidden", "/j/Ünïcode"]
    names = dataset_names(Variant("v", curated=folders))
    assert len({file_name_key(n) for n in names}) == len(names)  # Web and web: two folders on macOS too
    assert all(DATASET_NAME_RE.fullmatch(n) and len(n.encode()) <= MAX_DATASET_NAME for n in names), names
    assert "valid" not in names and names[0] == "Web"
