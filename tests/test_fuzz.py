"""Property-based fuzzing of the public API's bodies: an entry point called with one argument replaced by a
malformed value (wrong type, wrong shape, NaN, inf, empty, huge, negative) either works or raises a
:class:`tokensel.TokenselError`; and when it raises, no model, file or record of claims has changed.

The bad values of each declared argument on its own are generated from the declarations
(``test_declared.py``); the entry points listed here are those whose bodies check more (arguments against
each other: a batch against a model, labels against sequences, a range against the data), and the book's
functions, which are not declared."""

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
from tokensel_book.checks import ClaimFailedError

DATA = ts.synthetic.assumption1_pairs(8, 2, 4, length=(3, 5), seed=0)
BATCH = DATA.batch
S = BATCH.vocab_size
MC = ts.synthetic.independent_tokens_multiclass(9, 8, 3, length=5, seed=0).batch
WORDS = [["good", "film"], ["bad", "film"], ["good", "plot"]]
VOCAB = ts.data.text.build_vocabulary(WORDS, min_df=1)

BAD = st.sampled_from(
    [
        None,
        "",
        "abc",
        "1",
        b"x",
        True,
        False,
        0,
        -1,
        1.5,
        -0.5,
        2**63,
        10**30,
        float("nan"),
        float("inf"),
        -float("inf"),
        [],
        [[]],
        [1, "a"],
        [[1, 2], [3]],
        {},
        {"a": 1},
        (1, 2, 3),
        object(),
        np.array([]),
        np.array([np.nan]),
        np.array([[1.0, 2.0]]),
        np.array(["a"]),
        torch.tensor([]),
        torch.tensor([1.5, 2.5]),
        torch.tensor([True]),
        torch.zeros(3, dtype=torch.float16),
        torch.full((S,), float("nan")),
        torch.zeros(S, 2),
        Path("/nonexistent/dir/file.pt"),
    ]
)


def _model():
    return ts.AttentionModel.init(S, 4, seed=0)


def _variant():
    return ts.models.variants.make("mlp", S, 4, seed=0)


def _pairs():
    return np.array([[0, 2], [1, 3]])


# name -> (function taking the keyword arguments, a valid set of keyword arguments as a factory)
ENTRY_POINTS = {
    "from_sequences": (
        ts.RaggedBatch.from_sequences,
        lambda: dict(sequences=[[0, 1], [2]], labels=[1, -1], vocab_size=3, num_classes=None),
    ),
    "RaggedBatch": (
        ts.RaggedBatch,
        lambda: dict(
            ids=torch.tensor([0, 1, 2]), offsets=torch.tensor([0, 2, 3]), labels=torch.tensor([1.0, -1.0]), vocab_size=3
        ),
    ),
    "subset": (lambda **k: BATCH.subset(**k), lambda: dict(index=[0, 1])),
    "sequence": (lambda **k: BATCH.sequence(**k), lambda: dict(i=0)),
    "labels_from_01": (ts.labels_from_01, lambda: dict(labels=[0, 1])),
    "MultiClass.init": (ts.MultiClassAttentionModel.init, lambda: dict(vocab_size=8, d=4, num_classes=3, seed=0)),
    "AttentionModel": (
        ts.AttentionModel,
        lambda: dict(
            E=torch.zeros(S, 4, dtype=torch.float64),
            p=torch.zeros(4, dtype=torch.float64),
            v=torch.ones(4, dtype=torch.float64),
        ),
    ),
    "gradients": (ts.gradients, lambda: dict(model=_model(), batch=BATCH)),
    "one_step": (ts.one_step, lambda: dict(model=_model(), batch=BATCH, eta0=1.0)),
    "train_p": (
        ts.train_p,
        lambda: dict(model=_model(), batch=BATCH, lr=0.1, steps=2, method="gd", records=3, progress=False),
    ),
    "gradient_flow": (ts.gradient_flow, lambda: dict(model=_model(), batch=BATCH, t_max=1.0, records=3)),
    "train_joint": (
        ts.train_joint,
        lambda: dict(
            model=_model(),
            batch=BATCH,
            settings=ts.TrainSettings(steps=2, lr=0.01, eval_every=1, progress=False),
            params=("E", "p"),
            test_batch=BATCH,
        ),
    ),
    "binned": (ts.shapes.binned, lambda: dict(x=np.arange(5.0), y=np.arange(5.0), bins=2)),
    "shape_summary": (
        ts.shapes.shape_summary,
        lambda: dict(gap=np.linspace(-1, 1, 40), scores=np.arange(40.0), values=np.arange(40.0), bins=5),
    ),
    "values_spread": (
        ts.shapes.values_spread,
        lambda: dict(bins_v=ts.shapes.binned(np.arange(8.0), np.arange(8.0), bins=2)),
    ),
    "selection_pairs": (
        ts.selection_pairs,
        lambda: dict(batch=BATCH, selected=torch.ones(BATCH.num_tokens, dtype=torch.bool)),
    ),
    "max_margin": (ts.max_margin, lambda: dict(E=torch.eye(S, dtype=torch.float64), pairs=_pairs())),
    "max_margin_scores": (ts.max_margin_scores, lambda: dict(gram=torch.eye(S, dtype=torch.float64), pairs=_pairs())),
    "prepare_texts": (ts.prepare_texts, lambda: dict(texts=["a good film"] * 6, labels=[1, 0] * 3, min_df=1)),
    "vocab.id": (lambda **k: VOCAB.id(**k), lambda: dict(word="good")),
    "variant.forward": (lambda **k: _variant().forward(**k), lambda: dict(batch=BATCH, chunk=4)),
    "train_variant": (
        ts.train_variant,
        lambda: dict(
            model=_variant(),
            batch=BATCH,
            settings=ts.TrainSettings(steps=2, lr=0.01, eval_every=1, progress=False),
            chunk=None,
        ),
    ),
    "attention_html": (
        tb.display.attention_html,
        lambda: dict(words=["a", "b"], weights=[0.5], in_vocab=[True, False]),
    ),
    "assumption1_pairs": (
        ts.synthetic.assumption1_pairs,
        lambda: dict(n_pairs=2, n_important=1, n_irrelevant=2, length=3, seed=0),
    ),
    "iid_irrelevant": (ts.synthetic.iid_irrelevant, lambda: dict(n=4, n_important=1, n_irrelevant=2, length=3, seed=0)),
    "independent_tokens": (
        ts.synthetic.independent_tokens,
        lambda: dict(n=4, vocab_size=5, length=3, delta=1.0, seed=0),
    ),
    "load_reviews": (ts.load_reviews, lambda: dict(name="imdb", split="test", data_dir=Path("/nonexistent-tokensel"))),
    "prepare_reviews": (ts.reviews.prepare_reviews, lambda: dict(name="imdb", data_dir=Path("/nonexistent-tokensel"))),
    "check": (tb.check, lambda: dict(name="x", measured=1.0, expected=1.0, tol=0.1, kind="abs")),
    "start_chapter": (tb.start_chapter, lambda: dict(chapter="fuzz")),
}


def _state(kwargs, results: Path):
    """Bytes of every tensor reachable from the arguments, and of every file in the results folder."""
    h = hashlib.sha256()
    for v in kwargs.values():
        tensors = (
            [v]
            if isinstance(v, torch.Tensor)
            else [getattr(v, a) for a in ("E", "p", "v", "V") if isinstance(getattr(v, a, None), torch.Tensor)]
        )
        tensors += list(v.matrices.values()) if isinstance(v, ts.models.variants.VariantModel) else []
        for t in tensors:
            h.update(
                t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
                if t.dtype != torch.bool
                else t.cpu().numpy().tobytes()
            )
    for p in sorted(results.rglob("*")):
        if p.is_file() and not p.name.endswith(".lock"):
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_malformed_arguments_raise_only_tokensel_errors(name, data, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path / "checks"))
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
        if name == "check":  # documented: a malformed claim is recorded as failed before it raises
            from tokensel_book.records import load_results

            recs = load_results(tmp_path / "checks")
            assert recs and recs[-1]["checks"][-1]["passed"] is False, "a malformed claim must be on record"
        else:
            assert _state(kwargs, tmp_path) == before, f"{name} raised after changing state ({arg}={kwargs[arg]!r})"
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{name}({arg}={kwargs[arg]!r}) raised {type(exc).__name__}: {exc}")
    finally:
        torch.set_num_threads(2)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_valid_arguments_of_the_fuzzed_entry_points_work(name, tmp_path, monkeypatch):
    """The baselines are valid: the fuzz test exercises the checks, not a call that fails anyway."""
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path / "checks"))
    fn, valid = ENTRY_POINTS[name]
    if name in ("load_reviews", "prepare_reviews"):
        with pytest.raises(ts.DataUnavailableError):
            fn(**valid())
        return
    fn(**valid())


# ------------------------------------------------------------------ the claim API in its keyword form
#: each form of a claim a chapter writes, with values that hold
CLAIM_FORMS = {
    "at_least": dict(measured=2.0, at_least=1.0),
    "at_most": dict(measured=0.5, at_most=1.0),
    "close_to, tol": dict(measured=1.02, close_to=1.0, tol=0.05),
    "close_to, rel_tol": dict(measured=101.0, close_to=100.0, rel_tol=0.02),
    "a flag": dict(measured=True),
}
#: every keyword of check, those of the older form included (a mixed form must be refused, on record)
CLAIM_KEYWORDS = [
    "name",
    "measured",
    "at_least",
    "at_most",
    "close_to",
    "tol",
    "rel_tol",
    "statement",
    "deviation",
    "preregistered",
    "threshold",
    "expected",
    "kind",
]
#: values that are plausible somewhere (a label, a kind, a threshold near the baseline's, a huge integer, a
#: tensor that cannot be read), beside the malformed values of BAD
PLAUSIBLE = st.sampled_from(
    [
        1.0,
        0.0,
        -0.0,
        1e-300,
        2**53 + 1,
        10**400,
        np.float32(1.0),
        np.int64(3),
        np.bool_(True),
        torch.tensor(1.0),
        torch.tensor(1.0, requires_grad=True),
        torch.tensor(1.0, device="meta"),
        "lem-one-step",
        "Lemma 2.1",
        "abs",
        "rel",
        "le",
        "ge",
        "true",
        " claim",
        "the 30 % bound of Lemma 2.1 at eta0 = 30",
        "x" * 201,
        "two\nlines",
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    form=st.sampled_from(sorted(CLAIM_FORMS)),
    statement=st.sampled_from([None, "lem-one-step"]),
    threshold=st.sampled_from([None, "preregistered before the sweep"]),
    deviation=st.booleans(),
    preregistered=st.booleans(),
    changes=st.dictionaries(
        st.sampled_from(CLAIM_KEYWORDS),
        st.one_of(BAD, PLAUSIBLE, st.floats(), st.integers(-(2**70), 2**70)),
        max_size=3,
    ),
)
def test_every_keyword_claim_is_on_record_before_it_raises_and_a_failed_one_fails_verify(
    tmp_path, monkeypatch, form, statement, threshold, deviation, preregistered, changes
):
    """``tb.check`` in the keyword form every chapter writes (``threshold=`` too), with up to three of its
    keywords replaced by anything: the call is on record (one claim, exactly) whether it returns or raises;
    it returns only when the recorded claim holds, raises only a TokenselError otherwise, and a failed claim
    (malformed or false) makes ``end_chapter`` and ``verify`` fail, as a claim that holds lets them pass."""
    import tempfile

    from tokensel_book.records import load_results, mark_build_start
    from tokensel_book.verification import verify

    d = Path(tempfile.mkdtemp(dir=tmp_path))
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(d))
    monkeypatch.delenv("TOKENSEL_CLAIMS", raising=False)
    mark_build_start(d)
    tb.start_chapter("fuzz")
    kwargs = dict(
        name="claim",
        **CLAIM_FORMS[form],
        statement=statement,
        threshold=threshold,
        deviation=deviation,
        preregistered=preregistered,
    )
    kwargs.update(changes)
    raised = None
    try:
        returned = tb.check(**kwargs)
    except TokenselError as exc:
        raised = exc
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"check({kwargs!r:.300}) raised {type(exc).__name__}: {exc}")
    [rec] = load_results(d, chapter="fuzz")
    assert len(rec["checks"]) == 1, f"check({kwargs!r:.300}) is not on record exactly once"
    passed = rec["checks"][0]["passed"]
    assert passed is (raised is None), (kwargs, rec["checks"][0], raised)
    if raised is None:
        assert returned is kwargs["measured"]
    if not changes:
        assert passed, f"the baseline {form!r} must hold: {rec['checks'][0]}"
    if passed:
        tb.end_chapter()
        assert verify(d, expected={"fuzz": None}) == (1, 1)
    else:
        with pytest.raises(ClaimFailedError):
            tb.end_chapter()
        with pytest.raises(ClaimFailedError, match="fuzz: claim failed"):
            verify(d, expected={"fuzz": None})
