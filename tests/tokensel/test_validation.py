"""Validate first, reject rather than coerce: the cases found by trying the library with bad input, each
raising a tokensel error that names the argument (they were truncated, coerced or crashed before)."""

import numpy as np
import pandas as pd
import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidArgumentError, InvalidParameterError, SolverError
from tokensel.validation import all_finite, check_int, check_real, check_real_array


def _batch():
    return ts.synthetic.assumption1_pairs(6, 2, 5, length=(3, 5), seed=0).batch


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ts.RaggedBatch(torch.tensor([0.0, 1.0]), torch.tensor([0, 2]), [1], 2), "must be integers"),
        (lambda: ts.RaggedBatch(np.array([0.0, 1.0]), np.array([0, 2]), [1], 2), "must hold integers"),
        (lambda: _batch().subset(torch.tensor([0.0, 1.0])), "integers or booleans"),
        (lambda: ts.RaggedBatch.from_sequences([[0, 1]], ["pos"]), "labels must be numbers"),
    ],
)
def test_no_silent_coercion_into_a_batch(call, message):
    pytest.raises(ts.errors.InvalidBatchError, lambda: call()).match(message)


@pytest.mark.parametrize("doc", ["a good film", b"a good film", 3])
def test_untokenized_documents_are_refused(doc):
    vocab = ts.data.text.build_vocabulary([["good", "film"]], min_df=1)
    pytest.raises(ts.errors.ArgumentTypeError, lambda: ts.data.text.kept_words(doc, vocab)).match("tokenize")


@pytest.mark.parametrize(
    "text, words",
    [
        ("Café naïve Ørsted", ["café", "naïve", "ørsted"]),
        ("Cafe\u0301", ["café"]),  # decomposed accent: NFC makes it the same word
        ("Ελληνικά γράμματα", ["ελληνικά", "γράμματα"]),
        ("Привет, мир!", ["привет", "мир"]),
        ("مرحبا بالعالم", ["مرحبا", "بالعالم"]),
        ("שָׁלוֹם עוֹלָם", ["שָׁלוֹם", "עוֹלָם"]),
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),
        ("日本語の映画", ["日本語の映画"]),  # written without spaces: one run
        ("좋은 영화", ["좋은", "영화"]),
        ("don't it’s <br />fine", ["don't", "it's", "fine"]),
    ],
)
def test_tokenizer_keeps_letters_of_every_script(text, words):
    assert ts.data.text.tokenize(text) == words


def test_tokenizer_on_ascii_is_unchanged():
    words = ["it's", "a", "great", "film", "10", "10", "don't", "miss", "it"]
    assert ts.data.text.tokenize("It's a <br />GREAT film, 10/10 -- don't miss_it!") == words


def test_binned_handles_out_of_range_values_explicitly():
    x, y = np.array([-2.0, 0.1, 0.5, 0.9, 3.0]), np.arange(5.0)
    with pytest.raises(InvalidArgumentError, match="2 values of x lie outside range_"):
        ts.shapes.binned(x, y, bins=2, range_=(0.0, 1.0))
    dropped = ts.shapes.binned(x, y, bins=2, range_=(0.0, 1.0), out_of_range="drop")
    clipped = ts.shapes.binned(x, y, bins=2, range_=(0.0, 1.0), out_of_range="clip")
    assert dropped["count"].tolist() == [1, 2] and clipped["count"].tolist() == [2, 3]
    pytest.raises(InvalidArgumentError, lambda: ts.shapes.binned(x, y, range_=(1.0, 0.0))).match("lo < hi")
    pytest.raises(InvalidArgumentError, lambda: ts.shapes.binned(x, y[:3])).match("same shape")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_parameters_are_refused(dtype):
    pytest.raises(InvalidParameterError, lambda: ts.AttentionModel.init(5, 3, dtype=dtype)).match("half precision")
    with pytest.raises(InvalidParameterError, match="half precision"):
        ts.AttentionModel(torch.zeros(5, 3, dtype=dtype), torch.zeros(3, dtype=dtype), torch.ones(3, dtype=dtype))
    with pytest.raises(InvalidParameterError, match="half precision"):
        ts.models.variants.make("mlp", 5, 3, dtype=dtype)


def test_statistics_helpers_refuse_wrong_lengths():
    with pytest.raises(InvalidArgumentError, match="one entry per token"):
        ts.shapes.shape_summary(np.zeros(5), np.zeros(6), np.zeros(5))


def test_singular_gram_and_solver_failures_are_told_apart_from_infeasibility():
    G = torch.ones(3, 3, dtype=torch.float64)  # rank one
    with pytest.raises(InvalidParameterError, match="singular or not positive definite"):
        ts.max_margin_scores(G, np.array([[0, 1], [1, 2]]))
    E = torch.eye(4, dtype=torch.float64)
    with pytest.raises(SolverError, match="not installed"):
        ts.max_margin(E, np.array([[0, 1]]), solver="NO_SUCH_SOLVER")
    chain = np.array([[i, i + 1] for i in range(39)])
    with pytest.raises(SolverError, match="stopped with status|failed"):
        ts.max_margin(torch.randn(40, 30, dtype=torch.float64, generator=ts.generator(0)), chain, max_iter=1)
    assert not issubclass(SolverError, ts.InfeasibleSVMError)


def test_data_files_with_no_rows_and_an_unwritable_cache_get_their_own_messages(tmp_path, monkeypatch):
    (tmp_path / "imdb").mkdir()
    empty = pd.DataFrame({"text": pd.Series([], dtype=str), "label": pd.Series([], dtype="int64")})
    empty.to_parquet(tmp_path / "imdb" / "test.parquet")
    ts.data.manifest.write_manifest(tmp_path)  # its checksum is checked before it is parsed
    with pytest.raises(ts.errors.DataUnavailableError, match="valid parquet file with no rows"):
        ts.load_reviews("imdb", "test", data_dir=tmp_path)
    pd.DataFrame({"text": ["a fine film"], "label": [1]}).to_parquet(tmp_path / "imdb" / "test.parquet")
    ts.data.manifest.write_manifest(tmp_path)

    import datasets

    def unwritable(*a, **k):
        raise PermissionError(13, "Permission denied", "/read-only/cache")

    monkeypatch.setattr(datasets, "load_dataset", unwritable)
    monkeypatch.setenv("TOKENSEL_CACHE_DIR", "/proc/read-only-cache")  # local files need no cache at all
    ds = ts.load_reviews("imdb", "test", data_dir=tmp_path)
    assert ds["text"] == ["a fine film"] and ds.cache_files == []


@pytest.mark.parametrize(
    "value",
    [10**400, -(10**5000), torch.tensor(2.0, device="meta"), torch.tensor(2, device="meta"), torch.tensor(1 + 2j)],
    ids=["400 digits", "5000 digits", "meta float", "meta int", "complex"],
)
def test_numbers_that_cannot_be_numbers_are_refused_with_a_tokensel_error(value):
    for check in (check_int, check_real):
        pytest.raises(ts.errors.TokenselError, check, value, "x")


def test_zero_d_tensors_requiring_grad_and_bfloat16_give_their_value():
    assert check_real(torch.tensor(0.5, requires_grad=True), "lr") == 0.5
    assert check_real(torch.tensor(1.5, dtype=torch.bfloat16), "lr") == 1.5
    assert check_int(torch.tensor(3, dtype=torch.int32), "steps") == 3
    assert check_real_array(torch.ones(2, dtype=torch.bfloat16, requires_grad=True), "a").tolist() == [1.0, 1.0]
    pytest.raises(TypeError, lambda: check_real_array(torch.zeros(3, device="meta"), "a")).match("meta device")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_finite_finds_every_nan_and_inf_and_no_finite_overflow(dtype):
    big = torch.finfo(dtype).max
    assert all_finite(torch.zeros(0, dtype=dtype))
    assert all_finite(torch.randn(50, 7, dtype=dtype))
    # finite entries whose sum overflows (to inf, or to inf - inf = NaN): finite all the same
    assert all_finite(torch.tensor([big, big, 1.0], dtype=dtype))
    assert all_finite(torch.tensor([big, big, -big, -big], dtype=dtype))
    for bad in (float("nan"), float("inf"), -float("inf")):
        for at in (0, 17, 349):
            t = torch.randn(50, 7, dtype=dtype).flatten()
            t[at] = bad
            assert not all_finite(t.view(50, 7))
            assert not all_finite(t.view(50, 7).T)  # not contiguous
    # a NaN beside entries whose sum overflows
    assert not all_finite(torch.tensor([big, big, float("nan")], dtype=dtype))
    assert not all_finite(torch.tensor([float("inf"), -float("inf")], dtype=dtype))
