"""python -m tokensel: the command line (verify, data, manifest, imdb-mirror)."""

import json

import pytest

import tokensel_book as tb
from tokensel.__main__ import main
from tokensel_book.__main__ import main as book_main


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


# --- issue 24 (11): verify and replicate check their paths; every error is one line --------------------------


def _book(root):
    """A one-page book whose page records chapter "one" with one claim, and a complete record of it in
    ``root/checks`` (run as a kernel would: the call site is recorded)."""
    from IPython.core.interactiveshell import InteractiveShell

    cells = [
        'import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("one")',
        'tb.check("holds", 1.0, close_to=1.0, tol=0.0)',
    ]
    (root / "_config.yml").write_text("title: t\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: one\n")
    body = "".join(f"\n```{{code-cell}} ipython3\n{c}\n```\n" for c in cells + ["tb.end_chapter()"])
    (root / "one.md").write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n---\n# One\n" + body
    )
    tb.records.mark_build_start(root / "checks")
    shell = InteractiveShell.instance()
    for c in cells + ["tb.end_chapter()"]:
        shell.run_cell(c)


def _bad(root, kind):
    import os

    path = root / f"bad-{kind}"
    if kind == "file":
        path.write_text("x")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(root / "nowhere")
    elif kind == "empty folder":
        path.mkdir()
    elif kind == "":
        return ""
    return str(path)


@pytest.mark.parametrize(
    "kind, message",
    [
        ("missing", "does not exist"),
        ("file", "is a file, not a folder"),
        ("fifo", "is a FIFO, not a folder"),
        ("dangling", "is a dangling link"),
        ("", "an empty path"),
        ("empty folder", "one: no record from this build"),
    ],
)
def test_verify_checks_its_path_inside_a_book(tmp_path, monkeypatch, capsys, kind, message):
    _book(tmp_path)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert book_main(["verify", "checks"]) == 0
    assert "book claims: 1 hold in 1 chapters" in capsys.readouterr().out
    assert book_main(["verify", "checks", "--chapters", "one"]) == 0
    assert book_main(["verify", _bad(tmp_path, kind)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == (2 if kind == "empty folder" else 1), err  # the problem listed under


def test_verify_without_a_folder_reads_the_books_and_says_when_there_is_none(tmp_path, monkeypatch, capsys):
    _book(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOKENSEL_RESULTS_DIR")
    assert book_main(["verify"]) == 1
    assert "the book has no claim records" in capsys.readouterr().err


def test_replicate_refuses_a_bad_out_before_starting_anything(tmp_path, monkeypatch, capsys):
    import tokensel_book.replication as replication

    def no_cluster(*a, **k):
        pytest.fail("a Dask cluster was started for a command that fails on its path")

    monkeypatch.setattr(replication, "_cluster", no_cluster)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    for argv, message in [
        (["--out", "a-file", "--chapters", "one"], "--out (the replication's folder) 'a-file' is a file, not a folder"),
        (["--out", "a-file/sub", "--chapters", "one"], "cannot be written"),
        (["--out", "", "--chapters", "one"], "an empty path"),
        (["--summary", "--out", "missing"], "'missing' does not exist"),
        (["--compare", "missing", "--chapters", "one"], "--compare (the replication to compare with) 'missing'"),
    ]:
        assert book_main(["replicate", *argv]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_replicate_shows_an_os_error_in_one_line(tmp_path, monkeypatch, capsys):
    import errno

    import tokensel_book.replication as replication

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "x.json"))

    monkeypatch.setattr(replication, "main", full)
    monkeypatch.chdir(tmp_path)
    assert book_main(["replicate", "--out", "out", "--chapters", "one"]) == 1
    err = capsys.readouterr().err
    assert "No space left on device (OSError)" in err and "Traceback" not in err and len(err.splitlines()) == 1
