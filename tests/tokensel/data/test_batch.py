"""RaggedBatch: construction, views, and every malformed input."""

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidBatchError


def test_from_sequences_layout():
    b = ts.RaggedBatch.from_sequences([[0, 1, 2], [3], [4, 4]], [1, -1, 1], vocab_size=5)
    assert b.n == 3 and b.num_tokens == 6
    assert b.offsets.tolist() == [0, 3, 4, 6]
    assert b.lengths.tolist() == [3, 1, 2]
    assert b.seg.tolist() == [0, 0, 0, 1, 2, 2]
    assert b.sequence(1).tolist() == [3] and b.sequence(-1).tolist() == [4, 4]
    assert b.labels.dtype == torch.float64
    assert b.to_lists() == [[0, 1, 2], [3], [4, 4]]


def test_subset_and_truncate():
    b = ts.RaggedBatch.from_sequences([[0, 1, 2], [3], [4, 4, 1]], [1, -1, 1], vocab_size=5)
    s = b.subset([2, 0])
    assert s.to_lists() == [[4, 4, 1], [0, 1, 2]] and s.labels.tolist() == [1, 1]
    s = b.subset(torch.tensor([False, True, True]))
    assert s.to_lists() == [[3], [4, 4, 1]]
    assert b.truncate(2).to_lists() == [[0, 1], [3], [4, 4]]


def test_multiclass_labels():
    b = ts.RaggedBatch.from_sequences([[0], [1]], [0, 3], vocab_size=2, num_classes=4)
    assert b.labels.dtype == torch.long and b.num_classes == 4


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sequences=[[0, 1], [2]], labels=[1, 0]), "must be \\+1 or -1"),
        (dict(sequences=[[0, 1], [2]], labels=[1, 2]), "must be \\+1 or -1"),
        (dict(sequences=[[0, 1], []], labels=[1, -1]), "sequence 1 is empty"),
        (dict(sequences=[[0, 7], [2]], labels=[1, -1], vocab_size=5), "token id 7 .* outside"),
        (dict(sequences=[[0, -1], [2]], labels=[1, -1], vocab_size=5), "token id -1"),
        (dict(sequences=[[0, 1], [2]], labels=[1, -1, 1]), "expected 2 labels"),
        (dict(sequences=[[0, 1], [2]], labels=[1.0, float("nan")]), "NaN"),
        (dict(sequences=[[0], [1]], labels=[0, 4], num_classes=4), "must lie in 0..3"),
    ],
)
def test_bad_batches(kwargs, message):
    pytest.raises(InvalidBatchError, lambda: ts.RaggedBatch.from_sequences(**kwargs)).match(message)


def test_bad_raw_fields():
    with pytest.raises(InvalidBatchError, match="offsets must start at 0"):
        ts.RaggedBatch(torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([1.0]), 2)
    b = ts.RaggedBatch.from_sequences([[0], [1]], [1, -1])
    pytest.raises(InvalidBatchError, lambda: b.subset([5])).match("out of range")
    pytest.raises(InvalidBatchError, lambda: ts.labels_from_01([0, 1, 2])).match("0/1 labels")


def test_labels_from_01():
    assert ts.labels_from_01([0, 1, 1]).tolist() == [-1.0, 1.0, 1.0]


def test_distinct_entries_with_counts():
    b = ts.RaggedBatch.from_sequences([[2, 0, 2, 2], [1], [1, 1, 0]], [1, -1, 1], vocab_size=3)
    dt = b.distinct()
    assert dt.ids.tolist() == [0, 2, 1, 0, 1] and dt.seg.tolist() == [0, 0, 1, 2, 2]
    assert dt.counts.tolist() == [1.0, 3.0, 1.0, 1.0, 2.0] and dt.offsets.tolist() == [0, 2, 3, 5]
    assert b.distinct() is dt  # cached


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_batch_never_shares_memory_with_the_callers_arrays(kind):
    """Edits to the caller's arrays after validation must not leak into the batch (they used to alias)."""
    ids, offsets, labels = np.array([0, 1, 2, 1], dtype=np.int64), np.array([0, 2, 4]), np.array([1.0, -1.0])
    if kind == "torch":
        ids, offsets, labels = torch.from_numpy(ids), torch.from_numpy(offsets), torch.from_numpy(labels)
    batch = ts.RaggedBatch(ids, offsets, labels, vocab_size=3)
    ids[0] = 10**9
    offsets[1] = 99
    labels[0] = float("nan")
    assert batch.ids.tolist() == [0, 1, 2, 1] and batch.offsets.tolist() == [0, 2, 4]
    assert batch.labels.tolist() == [1, -1]


def test_a_batch_edited_in_place_is_checked_again_before_it_is_used():
    """Issue 48 (8): ids or labels edited after validation kept stale cached entries (or a raw IndexError)."""
    model = ts.AttentionModel.init(3, 4, seed=0)
    batch = ts.RaggedBatch.from_sequences([[0, 1], [2]], [1, -1], vocab_size=3)
    before = float(ts.gradients(model, batch).loss)
    batch.ids[0] = 2  # a valid edit: the cached entries are rebuilt
    assert float(ts.gradients(model, batch).loss) != before
    batch.ids[0] = 99
    pytest.raises(ts.errors.InvalidArgumentError, lambda: ts.gradients(model, batch)).match("token id 99")
    batch = ts.RaggedBatch.from_sequences([[0, 1], [2]], [1, -1], vocab_size=3)
    ts.gradients(model, batch)
    batch.labels[0] = 0
    pytest.raises(ts.errors.InvalidArgumentError, lambda: ts.gradients(model, batch)).match("must be \\+1 or -1, got 0")
