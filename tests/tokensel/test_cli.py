"""python -m tokensel: the science library's command line (data, manifest, imdb-mirror)."""

import json

import pytest

from tokensel.__main__ import main


def test_manifest_command_records_a_folder(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "imdb").mkdir()
    pq.write_table(pa.table({"text": ["a"], "label": [1]}), tmp_path / "imdb" / "train.parquet")
    assert main(["manifest", str(tmp_path)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert "imdb/train.parquet" in json.loads((tmp_path / "MANIFEST.json").read_text())["files"]


def test_errors_are_one_line_and_exit_codes_say_which(tmp_path, capsys):
    assert main(["imdb-mirror", str(tmp_path), str(tmp_path / "a.tar.gz")]) == 1  # no IMDB files there
    assert capsys.readouterr().err.startswith("error: ")
    with pytest.raises(SystemExit) as exc:
        main(["data", "no_such_set"])
    assert exc.value.code == 2 and "unknown data set 'no_such_set'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])  # a command is required
