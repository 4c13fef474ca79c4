"""Two [[sources]] that match one file with different settings: the file was read once, with the first source's
settings, and the warning only said "the same file" (probe r11: the second source's text_field = "title" was
ignored). Now the run stops at start, naming both sources and the settings that differ."""
import json

import pytest

from curate import readers
from curate.cli import main
from curate.config import ConfigError


def _data(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": f"body text number {i} of the document here", "title": f"t {i}"})
                            + "\n" for i in range(5)))
    return path


def test_a_file_matched_with_another_text_field_stops_the_run_at_start(tmp_path, capsys):
    path = _data(tmp_path)
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "ov"\noutput = "{tmp_path / "out"}"\nworkers = 1\n'
                    f'[[sources]]\npath = "{path}"\n'
                    f'[[sources]]\npath = "{tmp_path}/*.jsonl"\ntext_field = "title"\n')
    assert main(["run", str(toml)]) == 2
    err = capsys.readouterr().err
    assert "[[sources]] #2" in err and "[[sources]] #1" in err and 'text_field = "title" in #2, "text" in #1' in err, err
    assert str(path) in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("second, differ", [
    ({"id_field": "title"}, "id_field"),
    ({"format": "html"}, "format"),
    ({"text_field": "title", "id_field": "title"}, "text_field and id_field"),
])
def test_each_setting_that_differs_is_named(tmp_path, second, differ):
    path = _data(tmp_path)
    with pytest.raises(ConfigError, match=f"the same {differ}$"):
        readers.match_sources([{"path": str(path)}, {"path": str(path), **second}])


def test_the_same_settings_spelt_out_or_defaulted_are_one_file_read_once(tmp_path):
    path = _data(tmp_path)
    m = readers.match_sources([{"path": str(path)},
                               {"path": str(path), "text_field": "text", "id_field": "id", "format": "jsonl"}])
    assert [f["path"] for f in m.files] == [str(path)] and len(m.repeated) == 1
