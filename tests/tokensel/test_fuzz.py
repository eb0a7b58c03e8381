"""Malformed values (wrong type, shape, NaN, inf, empty, huge, negative) for the entry points whose bodies check
more than their declarations (arguments against each other), and for the book's undeclared functions: each works or
raises a TokenselError, and when it raises, no model, file or record of claims has changed."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokensel as ts
import tokensel_book as tb
from tokensel.errors import DivergenceError, TokenselError
from tokensel_book.claims import ClaimFailedError

DATA = ts.synthetic.assumption1_pairs(8, 2, 4, length=(3, 5), seed=0)
BATCH = DATA.batch
S = BATCH.vocab_size
MC = ts.synthetic.independent_tokens_multiclass(9, 8, 3, length=5, seed=0).batch
WORDS = [["good", "film"], ["bad", "film"], ["good", "plot"]]
VOCAB = ts.data.text.build_vocabulary(WORDS, min_df=1)

BAD = st.sampled_from(
    [None, "", "abc", "1", b"x", True, False, 0, -1, 1.5, -0.5, 2**63, 10**30, float("nan"), float("inf")]
    + [-float("inf"), [], [[]], [1, "a"], [[1, 2], [3]], {}, {"a": 1}, (1, 2, 3), object(), np.array([])]
    + [np.array([np.nan]), np.array([[1.0, 2.0]]), np.array(["a"]), torch.tensor([]), torch.tensor([1.5, 2.5])]
    + [torch.tensor([True]), torch.zeros(3, dtype=torch.float16), torch.full((S,), float("nan")), torch.zeros(S, 2)]
    + [Path("/nonexistent/dir/file.pt")]
)


def _model():
    return ts.AttentionModel.init(S, 4, seed=0)


def _variant():
    return ts.models.variants.make("mlp", S, 4, seed=0)


def _pairs():
    return np.array([[0, 2], [1, 3]])


# name -> (function taking the keyword arguments, a valid set of keyword arguments as a factory)
def _claim(**kwargs):
    """A claim of a chapter run outside the book (no claims table: any id)."""
    tb.start_chapter("fuzz")
    return tb.check(**kwargs)


def _settings():
    return ts.TrainSettings(steps=2, lr=0.01, eval_every=1, progress=False)


T, F64, NOWHERE = torch.tensor, torch.float64, Path("/nonexistent-tokensel")
# fmt: off
ENTRY_POINTS = {
    "from_sequences": (ts.RaggedBatch.from_sequences,
        lambda: dict(sequences=[[0, 1], [2]], labels=[1, -1], vocab_size=3, num_classes=None)),
    "RaggedBatch": (ts.RaggedBatch,
        lambda: dict(ids=T([0, 1, 2]), offsets=T([0, 2, 3]), labels=T([1.0, -1.0]), vocab_size=3)),
    "subset": (lambda **k: BATCH.subset(**k), lambda: dict(index=[0, 1])),
    "sequence": (lambda **k: BATCH.sequence(**k), lambda: dict(i=0)),
    "labels_from_01": (ts.labels_from_01, lambda: dict(labels=[0, 1])),
    "MultiClass.init": (ts.MultiClassAttentionModel.init, lambda: dict(vocab_size=8, d=4, num_classes=3, seed=0)),
    "AttentionModel": (ts.AttentionModel,
        lambda: dict(E=torch.zeros(S, 4, dtype=F64), p=torch.zeros(4, dtype=F64), v=torch.ones(4, dtype=F64))),
    "gradients": (ts.gradients, lambda: dict(model=_model(), batch=BATCH)),
    "one_step": (ts.one_step, lambda: dict(model=_model(), batch=BATCH, eta0=1.0)),
    "train_p": (ts.train_p,
                lambda: dict(model=_model(), batch=BATCH, lr=0.1, steps=2, method="gd", records=3, progress=False)),
    "gradient_flow": (ts.gradient_flow, lambda: dict(model=_model(), batch=BATCH, t_max=1.0, records=3)),
    "train_joint": (ts.train_joint,
        lambda: dict(model=_model(), batch=BATCH, settings=_settings(), params=("E", "p"), test_batch=BATCH)),
    "binned": (ts.shapes.binned, lambda: dict(x=np.arange(5.0), y=np.arange(5.0), bins=2)),
    "shape_summary": (ts.shapes.shape_summary,
        lambda: dict(gap=np.linspace(-1, 1, 40), scores=np.arange(40.0), values=np.arange(40.0), bins=5)),
    "values_spread": (ts.shapes.values_spread,
        lambda: dict(bins_v=ts.shapes.binned(np.arange(8.0), np.arange(8.0), bins=2))),
    "selection_pairs": (ts.selection_pairs,
        lambda: dict(batch=BATCH, selected=torch.ones(BATCH.num_tokens, dtype=torch.bool))),
    "max_margin": (ts.max_margin, lambda: dict(E=torch.eye(S, dtype=F64), pairs=_pairs())),
    "max_margin_scores": (ts.max_margin_scores, lambda: dict(gram=torch.eye(S, dtype=F64), pairs=_pairs())),
    "prepare_texts": (ts.prepare_texts, lambda: dict(texts=["a good film"] * 6, labels=[1, 0] * 3, min_df=1)),
    "vocab.id": (lambda **k: VOCAB.id(**k), lambda: dict(word="good")),
    "variant.forward": (lambda **k: _variant().forward(**k), lambda: dict(batch=BATCH, chunk=4)),
    "train_variant": (ts.train_variant, lambda: dict(model=_variant(), batch=BATCH, settings=_settings(), chunk=None)),
    "attention_html": (tb.display.attention_html,
        lambda: dict(words=["a", "b"], weights=[0.5], in_vocab=[True, False])),
    "assumption1_pairs": (ts.synthetic.assumption1_pairs,
        lambda: dict(n_pairs=2, n_important=1, n_irrelevant=2, length=3, seed=0)),
    "iid_irrelevant": (ts.synthetic.iid_irrelevant, lambda: dict(n=4, n_important=1, n_irrelevant=2, length=3, seed=0)),
    "independent_tokens": (ts.synthetic.independent_tokens,
        lambda: dict(n=4, vocab_size=5, length=3, delta=1.0, seed=0)),
    "load_reviews": (ts.load_reviews, lambda: dict(name="imdb", split="test", data_dir=NOWHERE)),
    "prepare_reviews": (ts.reviews.prepare_reviews, lambda: dict(name="imdb", data_dir=NOWHERE)),
    "check": (_claim, lambda: dict(claim_id="x", measured=1.0, close_to=1.0, tol=0.1)),
    "start_chapter": (tb.start_chapter, lambda: dict(chapter="fuzz")),
}
# fmt: on


def _state(kwargs, results: Path):
    """Bytes of every tensor reachable from the arguments, and of every file in the results folder."""
    h = hashlib.sha256()
    for v in kwargs.values():
        tensors = [v] if isinstance(v, torch.Tensor) else [getattr(v, a, None) for a in ("E", "p", "v", "V")]
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
        tensors += list(v.matrices.values()) if isinstance(v, ts.models.variants.VariantModel) else []
        for t in tensors:
            data = t.cpu().numpy() if t.dtype == torch.bool else t.detach().cpu().contiguous().view(torch.uint8).numpy()
            h.update(data.tobytes())
    for p in sorted(results.rglob("*")):
        if p.is_file() and not p.name.endswith(".lock"):
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_malformed_arguments_raise_only_tokensel_errors(name, data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOKENSEL_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fn, valid = ENTRY_POINTS[name]
    kwargs = valid()
    arg = data.draw(st.sampled_from(sorted(kwargs)), label="argument")
    kwargs[arg] = data.draw(BAD, label="value")
    before = _state(kwargs, tmp_path)
    try:
        fn(**kwargs)
    except ClaimFailedError:  # documented: a claim that cannot hold is recorded as failed, then raised
        pass
    except DivergenceError:  # documented: the model keeps the last finite step's parameters
        for v in kwargs.values():
            if hasattr(v, "validate"):
                v.validate()
    except TokenselError:
        assert _state(kwargs, tmp_path) == before, f"{name} raised after changing state ({arg}={kwargs[arg]!r})"
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{name}({arg}={kwargs[arg]!r}) raised {type(exc).__name__}: {exc}")
    finally:
        torch.set_num_threads(2)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_valid_arguments_of_the_fuzzed_entry_points_work(name, tmp_path, monkeypatch):
    """The baselines are valid: the fuzz test exercises the checks, not a call that fails anyway."""
    monkeypatch.chdir(tmp_path)
    fn, valid = ENTRY_POINTS[name]
    if name in ("load_reviews", "prepare_reviews"):
        pytest.raises(ts.DataUnavailableError, lambda: fn(**valid()))
        return
    fn(**valid())
