"""tokensel.data.manifest: checksum manifests of local data folders and the published checksums of the
project's copy."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import shared_data_dir

import tokensel as ts
from tokensel.data.manifest import sha256_file, write_manifest
from tokensel.errors import DataUnavailableError


def test_local_folder_is_checked_against_its_manifest(tmp_path):
    root = tmp_path / "data"
    (root / "imdb").mkdir(parents=True)
    pq.write_table(pa.table({"text": ["good", "bad"], "label": [1, 0]}), root / "imdb" / "train.parquet")
    # no manifest: the published checksum of the project's copy is expected, and this file is another one
    with pytest.raises(DataUnavailableError, match="but 86ecb359.* is expected .*tokensel.data.manifest.KNOWN"):
        ts.load_reviews("imdb", "train", data_dir=root)
    pq.write_table(pa.table({"text": ["x"], "label": [1]}), root / "imdb" / "extra.parquet")
    with pytest.raises(DataUnavailableError, match="no checksum is known.*python -m tokensel manifest"):
        ts.data.manifest.verify(root, "imdb/extra.parquet")
    write_manifest(root)
    assert ts.load_reviews("imdb", "train", data_dir=root).num_rows == 2
    # the file changes after the manifest was written: refused, both checksums named
    pq.write_table(pa.table({"text": ["good", "bad", "ugly"], "label": [1, 0, 0]}), root / "imdb" / "train.parquet")
    with pytest.raises(DataUnavailableError, match="has SHA-256 [0-9a-f]{64}, but [0-9a-f]{64} is expected"):
        ts.load_reviews("imdb", "train", data_dir=root)
    (root / "MANIFEST.json").write_text(json.dumps({"files": {"imdb/train.parquet": "1234"}}))
    with pytest.raises(DataUnavailableError, match="'1234' is not a SHA-256"):
        ts.load_reviews("imdb", "train", data_dir=root)
    (root / "MANIFEST.json").write_text("{not json")
    with pytest.raises(DataUnavailableError, match="not a readable JSON manifest"):
        ts.load_reviews("imdb", "train", data_dir=root)
    (root / "MANIFEST.json").write_text(json.dumps(["a list"]))
    with pytest.raises(DataUnavailableError, match="no 'files' table"):
        ts.load_reviews("imdb", "train", data_dir=root)


def test_the_project_copy_matches_the_published_checksums():
    d = shared_data_dir()
    if d is None:
        pytest.skip("no local copy of the data (set TOKENSEL_DATA_DIR)")
    for rel, digest in ts.data.manifest.KNOWN.items():
        assert sha256_file(d / rel) == digest, rel
