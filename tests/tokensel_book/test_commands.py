"""python -m tokensel_book: each command checks its paths first and says what is wrong in one line."""

import errno
import os
import signal

import pytest

from tokensel_book.__main__ import main


def _bad(root, kind):
    path = root / f"bad-{kind}"
    if kind == "file":
        path.write_text("x")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(root / "nowhere")
    return "" if kind == "" else str(path)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "does not exist"),
        ("file", "is a file, not a folder"),
        ("fifo", "is a FIFO, not a folder"),
        ("dangling", "is a dangling link"),
        ("", "an empty path"),
    ],
)
def test_verify_refuses_a_build_folder_that_is_not_one_in_one_line(tmp_path, monkeypatch, capsys, kind, message):
    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: one\n")
    monkeypatch.chdir(tmp_path)
    assert main(["verify", _bad(tmp_path, kind)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err


def test_commands_outside_a_book_say_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for argv in (["verify"], ["contents"], ["student"], ["format", "--check"], ["assignments"]):
        assert main(argv) == 1, argv
        assert "is not inside a book" in capsys.readouterr().err, argv


def test_verify_wants_chapters_when_it_is_given_some(tmp_path, monkeypatch, capsys):
    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: one\n")
    (tmp_path / "_build").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--chapters", ""]) == 1
    assert "no chapter to verify" in capsys.readouterr().err


def test_replicate_refuses_a_bad_path_before_starting_anything(tmp_path, monkeypatch, capsys):
    import dask.distributed

    monkeypatch.setattr(dask.distributed, "LocalCluster", lambda *a, **k: pytest.fail("a cluster was started"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    for argv, message in [
        (["--out", "a-file", "--chapters", "one"], "--out (the replication's folder) 'a-file' is a file, not a folder"),
        (["--out", "a-file/sub", "--chapters", "one"], "cannot be written"),
        (["--out", "", "--chapters", "one"], "an empty path"),
        (["--compare", "missing", "--chapters", "one"], "--compare (the replication to compare with) 'missing'"),
        (["--seeds", "0", "--chapters", "one"], "--seeds must be at least 1"),
    ]:
        assert main(["replicate", *argv]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_replicate_shows_an_os_error_in_one_line(tmp_path, monkeypatch, capsys):
    import tokensel_book.replication as replication

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "x.json"))

    monkeypatch.setattr(replication, "main", full)
    monkeypatch.chdir(tmp_path)
    assert main(["replicate", "--out", "out", "--chapters", "one"]) == 1
    err = capsys.readouterr().err
    assert "No space left on device (OSError)" in err and "Traceback" not in err and len(err.splitlines()) == 1


ALIASES = "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 4)}]\n" for i in range(20))
BOMB = "format: jb-book\nroot: one\na: &a [x, x, x, x, x, x, x, x, x, x]\n" + ALIASES


@pytest.mark.parametrize("toc", [BOMB, "format: jb-book\nroot: &r [*r]\n", "root: [unclosed\n"])
def test_a_table_of_contents_with_aliases_or_broken_yaml_is_refused_at_once(tmp_path, monkeypatch, capsys, toc):
    """Issue 48 (6): aliases describing 2^40 entries hung verify; a self-reference raised a raw RecursionError."""
    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "_toc.yml").write_text(toc)
    (tmp_path / "_build").mkdir()
    monkeypatch.chdir(tmp_path)

    def hung(*args):
        raise TimeoutError("verify hung on the table of contents")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        assert main(["verify"]) == 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_pdf_and_grade_write_over_their_own_output_only(tmp_path, monkeypatch, capsys):
    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: one\n")
    for folder in ("html", "assignments", "submissions"):
        (tmp_path / folder).mkdir()
    (tmp_path / "html" / "index.html").write_text("<html></html>")
    (tmp_path / "thesis.tex").write_text("\\documentclass{book}")
    monkeypatch.chdir(tmp_path)
    for argv in (["pdf", "html", "thesis.tex"], ["grade", "assignments", "submissions", "--out", "thesis.tex"]):
        assert main(argv) == 1, argv
        assert "'thesis.tex' exists and is not a" in capsys.readouterr().err, argv
    assert (tmp_path / "thesis.tex").read_text() == "\\documentclass{book}"


def test_a_chapters_only_pdf_prints_the_front_page_and_the_numbered_chapters(tmp_path, monkeypatch, capsys):
    from tokensel_book import pdf

    (tmp_path / "_config.yml").write_text("title: t\n")
    chapters = "".join(f"  - file: book/{p}\n" for p in ("01_a", "02_b", "status", "api", "api/models"))
    toc = "format: jb-book\nroot: book/intro\nchapters:\n" + chapters
    (tmp_path / "_toc.yml").write_text(toc)
    (tmp_path / "html").mkdir()
    (tmp_path / "html" / "index.html").write_text("<html></html>")
    printed = {}

    def fake(html, out, pages):
        printed[out.name] = pages
        out.write_bytes(b"%PDF-1.7")
        return out

    monkeypatch.setattr(pdf, "print_book", fake)
    monkeypatch.chdir(tmp_path)
    assert main(["pdf", "html", "all.pdf"]) == 0 and main(["pdf", "html", "chapters.pdf", "--chapters-only"]) == 0
    assert printed["all.pdf"] == ["book/intro", "book/01_a", "book/02_b", "book/status", "book/api"]
    assert printed["chapters.pdf"] == ["book/intro", "book/01_a", "book/02_b"]
