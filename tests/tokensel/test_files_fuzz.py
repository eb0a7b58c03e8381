"""Fuzzing what tokensel reads from disk and its command line (issue 24): a damaged checkpoint, manifest, archive,
cache or path is accepted or refused with one TokenselError (one line and a non-zero exit): never a crash or hang."""

import csv
import gzip
import io
import json
import os
import signal
import tarfile
from pathlib import Path

import pytest
import torch
from conftest import source_archive, train_args, write_book
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tokensel as ts
from tokensel.__main__ import main
from tokensel.data import imdb_archive
from tokensel.data.manifest import read_manifest, sha256_file, verify
from tokensel.errors import CheckpointError, DataUnavailableError, StorageError, TokenselError
from tokensel_book.__main__ import main as book_main

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
BATCH = ts.synthetic.independent_tokens(40, 12, length=5, delta=0.8, seed=1).batch
KW = dict(steps=3, lr=0.05, eval_every=1, progress=False, checkpoint_every=1)


def _good_checkpoint(path):
    model = ts.AttentionModel.init(12, 4, seed=0)
    ts.train_joint(model, BATCH, **train_args(checkpoint=path, **KW))
    return torch.load(path, weights_only=True)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "run.pt"
    state = _good_checkpoint(path)
    return path.read_bytes(), state


def _resume_leaves_model_alone_or_resumes(path):
    model = ts.AttentionModel.init(12, 4, seed=0)
    E0 = model.E.clone()
    try:
        ts.train_joint(model, BATCH, **train_args(checkpoint=path, **KW))
    except CheckpointError:
        assert torch.equal(model.E, E0), "a refused checkpoint changed the model"
        return "refused"
    model.validate()  # resumed: every parameter is finite
    return "resumed"


@FUZZ
@given(
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
    truncate=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_damaged_checkpoint_bytes_are_refused_or_harmless(tmp_path_factory, checkpoint, cuts, truncate):
    data = bytearray(checkpoint[0])
    for pos, byte in cuts:
        data[pos % len(data)] = byte
    if truncate is not None:
        data = data[: truncate % len(data)]
    path = tmp_path_factory.mktemp("bytes") / "run.pt"
    path.write_bytes(bytes(data))
    _resume_leaves_model_alone_or_resumes(path)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=70),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(
    manifest=st.one_of(JSON, st.fixed_dictionaries({"files": st.dictionaries(st.text(max_size=30), JSON, max_size=3)})),
    raw=st.one_of(st.none(), st.binary(max_size=200)),
)
def test_any_manifest_is_read_or_refused_with_one_error(tmp_path_factory, manifest, raw):
    root = tmp_path_factory.mktemp("manifest")
    (root / "imdb").mkdir()
    (root / "imdb" / "train.parquet").write_bytes(b"PAR1 data")
    (root / "MANIFEST.json").write_bytes(raw if raw is not None else json.dumps(manifest).encode())
    try:
        files = read_manifest(root)
        assert files is None or all(isinstance(v, str) and len(v) == 64 for v in files.values())
        verify(root, "imdb/train.parquet")
    except DataUnavailableError:
        pass


def _tar(members):
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


NAMES = st.one_of(
    st.builds(
        lambda s, f, i, r: f"aclImdb/{s}/{f}/{i}_{r}.txt",
        st.sampled_from(["train", "test"]),
        st.sampled_from(["pos", "neg"]),
        st.one_of(st.integers(0, 20), st.just("9" * 5000), st.just("-1")),
        st.one_of(st.integers(0, 12), st.just("1" * 50)),
    ),
    st.text(max_size=40),
    st.sampled_from(["aclImdb/train/pos/", "aclImdb/train/pos/x.txt", "aclImdb/README", "../../etc/passwd"]),
)


@FUZZ
@given(
    members=st.lists(st.tuples(NAMES, st.binary(max_size=40)), max_size=12),
    cut=st.one_of(st.none(), st.integers(1, 400)),
)
def test_any_archive_is_parsed_or_refused_with_a_data_error(tmp_path_factory, members, cut):
    try:
        data = _tar(members)
    except (ValueError, UnicodeEncodeError, tarfile.TarError):
        assume(False)
    if cut is not None:
        data = data[: cut % max(len(data), 1)]
    path = tmp_path_factory.mktemp("archive") / "a.tar.gz"
    path.write_bytes(data)
    try:
        tables = imdb_archive.parse_archive(path)
    except DataUnavailableError:
        return
    for t in tables.values():
        ratings = t.column("rating").to_pylist()
        assert all(1 <= r <= 10 for r in ratings) and set(t.column("label").to_pylist()) == {0, 1}


def test_a_huge_review_member_is_refused_without_being_read(tmp_path):
    """A 400 MB review (declared in the header, streamed from a small gzip) is refused by its size."""
    path = tmp_path / "big.tar.gz"
    path.write_bytes(_tar([("aclImdb/train/pos/1_9.txt", b"a" * (imdb_archive.MAX_REVIEW_BYTES + 1))]))
    assert path.stat().st_size < 20_000
    pytest.raises(DataUnavailableError, lambda: imdb_archive.parse_archive(path)).match("a review of 1,048,577 bytes")
    (tmp_path / "ids.tar.gz").write_bytes(_tar([("aclImdb/train/pos/" + "9" * 5000 + "_9.txt", b"x")]))
    with pytest.raises(DataUnavailableError, match="at most 9 digits"):
        imdb_archive.parse_archive(tmp_path / "ids.tar.gz")


TRAIN = dict(
    text=["good film", "great", "bad film", "awful"], label=[1, 1, 0, 0], rating=[9, 8, 2, 1], review_id=[0, 1, 2, 3]
)
SMALL = {"train": TRAIN, "test": {"text": ["good", "bad"], "label": [1, 0], "rating": [10, 1], "review_id": [0, 1]}}


@pytest.fixture
def parsed(tmp_path, monkeypatch):
    archive = imdb_archive.write_archive(SMALL, tmp_path / "aclImdb_v1.tar.gz")
    source_archive(monkeypatch, archive, tmp_path / "cache")
    return archive, imdb_archive.prepare(str(archive))


def test_a_parsed_cache_rewritten_to_match_edited_data_is_parsed_again(parsed):
    """An edited parquet with a rewritten manifest fails the seal (keyed by the archive): the cache is parsed again."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    archive, folder = parsed
    train = folder / "imdb" / "train.parquet"
    pq.write_table(pa.table(TRAIN | {"text": ["EDITED"] * 4}), train)
    meta = json.loads((folder / "MANIFEST.json").read_text())
    meta["files"]["imdb/train.parquet"] = sha256_file(train)
    (folder / "MANIFEST.json").write_text(json.dumps(meta))
    ds = ts.load_reviews("imdb", "train")
    assert "EDITED" not in ds["text"] and sorted(ds["text"]) == sorted(SMALL["train"]["text"])


@FUZZ
@given(edit=st.sampled_from(["truncate", "garbage", "manifest", "seal", "folder", "key"]))
def test_any_damage_to_the_parsed_cache_is_repaired_or_refused(tmp_path_factory, edit):
    root = tmp_path_factory.mktemp("cache")
    archive = imdb_archive.write_archive(SMALL, root / "a.tar.gz")
    folder = imdb_archive.prepare(str(archive), sha256=sha256_file(archive), cache=root / "imdb")
    train = folder / "imdb" / "train.parquet"
    if edit == "truncate":
        train.write_bytes(train.read_bytes()[:50])
    elif edit == "garbage":
        train.write_bytes(b"\0" * 100)
    elif edit == "manifest":
        (folder / "MANIFEST.json").write_text("{not json")
    elif edit == "seal":
        meta = json.loads((folder / "MANIFEST.json").read_text())
        meta["seal"] = "0" * 64
        (folder / "MANIFEST.json").write_text(json.dumps(meta))
    elif edit == "folder":
        train.unlink()
        train.mkdir()
    elif edit == "key":
        (root / "imdb" / ".seal-key").write_bytes(b"short")
    try:
        again = imdb_archive.prepare(str(archive), sha256=sha256_file(archive), cache=root / "imdb")
    except TokenselError:
        assert edit == "key"
        return
    import pyarrow.parquet as pq

    by_label_and_id = [t for _, _, t in sorted(zip(TRAIN["label"], TRAIN["review_id"], TRAIN["text"], strict=True))]
    assert pq.read_table(again / "imdb" / "train.parquet").column("text").to_pylist() == by_label_and_id


#: the commands that take a path, in one line each, " | " between them
COMMANDS = (
    "manifest {p} | imdb-mirror {p} {p}/a.tar.gz | imdb-mirror {d} {p} | book format --check {p} | "
    "book format {p} | book pdf {p} | book pdf {d} {p} | book student {p} | book student {d} {p} | "
    "book contents | book format --check | book verify {p} | book verify {p} --chapters x | "
    "book replicate --out {p} --chapters 01_model | book replicate --compare {p} --chapters 01_model | "
    "book assignments {p} | book grade {p} {d} | book grade {d} {p} | book grade {p} {d} --out {d}/g.csv"
)
COMMANDS = [c.split() for c in COMMANDS.split(" | ")]


@pytest.fixture
def no_cluster(monkeypatch):
    """replicate fails on its path before it starts anything: a Dask cluster started here fails the test."""
    import dask.distributed

    monkeypatch.setattr(dask.distributed, "LocalCluster", lambda *a, **k: pytest.fail("a cluster was started"))
    monkeypatch.setattr(dask.distributed, "Client", lambda *a, **k: pytest.fail("a cluster was reached"))


def run(argv) -> int:
    """``python -m tokensel ARGV``, or ``python -m tokensel_book ARGV[1:]`` for a command marked ``book``."""
    return book_main(argv[1:]) if argv[0] == "book" else main(argv)


def _make(root, kind):
    path = root / f"x-{kind}"
    if kind == "file":
        path.write_text("hello")
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(root / "nowhere")
    elif kind == "unreadable":
        path.write_text("secret")
        path.chmod(0)
    elif kind == "notbook.md":
        path = root / "notbook.md"
        path.write_bytes(b"\xff\xfe not utf-8 \x00")
    elif kind == "":
        return ""
    return str(path)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("kind", ["missing", "file", "folder", "fifo", "dangling", "unreadable", "notbook.md", ""])
def test_every_command_given_a_bad_path_prints_one_line_and_exits_non_zero(
    tmp_path, monkeypatch, capsys, no_cluster, command, kind
):
    """Run outside a book (in an empty folder): no command reports success, shows a traceback or blocks on a FIFO."""
    monkeypatch.chdir(tmp_path)
    p = _make(tmp_path, kind)
    argv = [a.format(p=p, d=str(tmp_path)) for a in command]
    try:
        code = run(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2 with a usage line
        code = exc.code
    out, err = capsys.readouterr()
    assert code not in (0, None), (argv, out, err)
    assert "Traceback" not in err + out
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and (len(lines) == 1 or lines[0].startswith("usage:")), err


SUBMISSIONS = ["file", "folder", "fifo", "dangling", "unreadable", "notbook.md"]


@pytest.mark.parametrize("teacher", [False, True], ids=["submission", "teachers-copy"])
@pytest.mark.parametrize("kind", SUBMISSIONS)
def test_grade_never_opens_or_crashes_on_a_bad_notebook_in_the_class_folders(
    tmp_path, monkeypatch, capsys, kind, teacher
):
    """A bad submission is graded missing without a kernel; a bad teacher's copy is one line; no hang, no traceback."""

    from tokensel_book import assignments

    write_book(tmp_path, "01_a")
    (tmp_path / "book" / "answers.py").write_text(
        "from tokensel_book.exercises import Answer, exercise\n\n\n"
        "@exercise('ex-a', Answer('x', 'hint', tol=0.1))\ndef _a(given, answers):\n    return {'x': 1.0}\n"
    )
    monkeypatch.chdir(tmp_path)
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "source": "tb.self_check('ex-a', x=None)", "metadata": {}, "outputs": [],
         "execution_count": None}]}  # fmt: skip
    a, s = tmp_path / "a", tmp_path / "s" / "ann"
    a.mkdir()
    s.mkdir(parents=True)
    (a / assignments.MARK).write_text("")
    bad = Path(_make(a if teacher else s, kind))
    bad.rename(bad.parent / "ch.ipynb")  # a link is renamed, not followed
    (s if teacher else a).joinpath("ch.ipynb").write_text(json.dumps(nb))
    monkeypatch.setattr(assignments, "references", lambda *a, **k: {"ex-a": {"x": 1.0}})
    monkeypatch.setattr(assignments, "run_notebook", lambda *a, **k: pytest.fail("a bad notebook was executed"))

    def hung(*args):
        raise TimeoutError("grade blocked on a path")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        code = book_main(["grade", str(a), str(tmp_path / "s"), "--out", str(tmp_path / "g.csv")])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if teacher:
        assert code == 1 and len(err.strip().splitlines()) == 1 and "teacher's copy" in err, err
        assert not (tmp_path / "g.csv").exists()
        return
    assert code == 0, err
    assert out.splitlines()[0].startswith("ann: 0 of 1 answers right (ch: unreadable"), out
    [row] = list(csv.DictReader((tmp_path / "g.csv").open()))
    assert row["verdict"] == "missing" and row["error"].startswith("unreadable:"), row


def test_a_cache_folder_that_is_a_file_is_one_storage_error_while_parsing_the_archive(tmp_path, monkeypatch):
    """Issue 24 root cause 9: a cache folder that is a file is one StorageError naming the cache."""
    archive = imdb_archive.write_archive(SMALL, tmp_path / "aclImdb_v1.tar.gz")
    target = tmp_path / "cache"
    target.write_text("not a folder")
    source_archive(monkeypatch, archive, target)
    pytest.raises(StorageError, lambda: imdb_archive.prepare(str(archive))).match("cache|TOKENSEL_CACHE_DIR")
