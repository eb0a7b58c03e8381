"""Bad input the declarations cannot see (arguments that disagree with each other or the data): a clear error."""

import numpy as np
import pytest

import tokensel as ts
import tokensel_book as tb
from tokensel.errors import DataUnavailableError, InvalidBatchError


def _batch():
    return ts.synthetic.assumption1_pairs(6, 2, 5, length=(3, 5), seed=0).batch


def _multiclass():
    return ts.synthetic.independent_tokens_multiclass(8, 10, 2, seed=0).batch


def _variant(vocab=None):
    return ts.models.variants.make("two_layer", vocab or _batch().vocab_size, 4, seed=0)


B, V, HTML = InvalidBatchError, ValueError, tb.display.attention_html
CASES = [
    ("no finite pairs to bin", lambda: ts.shapes.binned(np.full(3, np.nan), np.zeros(3)), V, "no finite"),
    ("one step, other vocab", lambda: ts.one_step(ts.AttentionModel.init(99, 3), _batch(), eta0=1.0), B, "E has 99"),
    ("empty subset", lambda: _batch().subset([]), B, "empty"),
    ("variant, multi-class", lambda: _variant(_multiclass().vocab_size).forward(_multiclass()), B, "binary models"),
    ("variant, other vocab", lambda: _variant(99).forward(_batch()), B, "E has 99 rows"),
    ("fit, vocab", lambda: ts.train_variant(_variant(99), _batch(), ts.TrainSettings(steps=2)), B, "E has 99"),
    ("weights, words", lambda: HTML(["a", "b", "c"], [0.5], [True, True, False]), V, "one weight per"),
    ("flags, words", lambda: HTML(["a", "b"], [0.5], [True]), V, "2 words but 1"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    pytest.raises(error, lambda: call()).match(message)


def test_data_directory_that_is_a_file(tmp_path):
    f = tmp_path / "data.txt"
    f.write_text("not a folder")
    pytest.raises(DataUnavailableError, lambda: ts.load_reviews("imdb", "test", data_dir=f)).match("TOKENSEL_DATA_DIR")
