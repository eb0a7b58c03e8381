"""The compiled kernels (tokensel.models.kernels) against the reference of tokensel.models.core and numpy: binary and
K-class, float64 and float32, length-1 sequences, repeated tokens, saturated scores; the same bits on every run and
for any thread count."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidParameterError
from tokensel.training.loop import _evaluate

k = ts.models.kernels


def _batch(seed, n, vocab, max_len, K=None):
    g = np.random.default_rng(seed)
    # lengths from 1 (a lone token) up, tokens from a small vocabulary so that most repeat
    seqs = [g.integers(0, vocab, size=g.integers(1, max_len + 1)) for _ in range(n)]
    seqs[0] = np.array([vocab - 1])  # a length-1 sequence
    seqs[1] = np.array([2, 2, 2, 1, 2])  # one token repeated, with another
    y = g.choice([-1, 1], size=n) if K is None else g.integers(0, K, size=n)
    return ts.RaggedBatch.from_sequences(seqs, y, vocab_size=vocab, num_classes=K)


def _model(vocab, d, K, dtype, scale, seed=0):
    if K is None:
        m = ts.AttentionModel.init(vocab, d, seed=seed, dtype=dtype)
    else:
        m = ts.MultiClassAttentionModel.init(vocab, d, K, seed=seed, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    m.p.copy_(torch.randn(d, generator=g, dtype=torch.float64).to(dtype) * scale)
    return m


def _rel(x, y):
    return float((x - y).abs().max() / y.abs().max().clamp_min(1e-300))


CASES = [(None, torch.float64, 1e-12), (4, torch.float64, 1e-12), (None, torch.float32, 2e-5), (4, torch.float32, 2e-5)]


@pytest.mark.parametrize("K,dtype,tol", CASES)
@pytest.mark.parametrize("scale", [0.3, 3.0, 40.0])  # 40: saturated softmax, where the stable form matters
def test_fused_equals_reference(K, dtype, tol, scale):
    batch = _batch(1, n=60, vocab=17, max_len=30, K=K)
    model = _model(17, 8, K, dtype, scale)
    fast = ts.gradients(model, batch, fused=True)
    ref = ts.gradients(model, batch, fused=False)
    assert abs(fast.loss - ref.loss) <= tol * max(abs(ref.loss), 1e-3)
    for name in ("f", "A", "B", "p", "v", "E"):
        assert _rel(getattr(fast, name), getattr(ref, name)) <= tol, name
    assert fast.f.dtype == fast.A.dtype == fast.p.dtype == fast.E.dtype == dtype
    assert fast.B.shape == ref.B.shape and fast.v.shape == ref.v.shape
    buf = torch.full_like(model.E, float("nan"))  # grad_E into a reused buffer, and into a strided one
    assert fast.E_into(buf) is buf and torch.equal(buf, fast.E)
    assert torch.equal(fast.E_into(torch.empty(8, 17, dtype=dtype).T), fast.E)


def test_p_gradient_fused_equals_reference():
    batch = _batch(2, n=40, vocab=13, max_len=20)
    model = _model(13, 6, None, torch.float64, 2.0)
    w = model.E @ model.v
    loss, grad = ts.p_gradient(model.E, model.p, w, batch)
    ref = ts.models.core.score_value_grads(batch, model.E @ model.p, w)
    assert abs(float(loss) - float(ref.loss)) <= 1e-12 * float(ref.loss)
    assert _rel(grad, model.E.T @ ref.A) <= 1e-12
    assert loss.dtype == torch.float64 and loss.ndim == 0


@pytest.mark.parametrize("K,dtype", [(None, torch.float64), (3, torch.float32)])
def test_bitwise_deterministic_across_runs_and_thread_counts(K, dtype, monkeypatch):
    batch = _batch(3, n=3000, vocab=50, max_len=60, K=K)
    model = _model(50, 40, K, dtype, 1.0)
    runs = []
    torch_threads = torch.get_num_threads()
    try:
        for threads in (2, 2, 1, 3):
            monkeypatch.setenv("TOKENSEL_THREADS", str(threads))
            torch.set_num_threads(threads)
            runs.append(ts.gradients(model, batch, fused=True))
    finally:
        torch.set_num_threads(torch_threads)
    for other in runs[1:]:
        assert other.loss == runs[0].loss
        for name in ("f", "A", "B", "p", "v", "E"):
            assert torch.equal(getattr(runs[0], name), getattr(other, name)), name


def test_one_sequence_of_one_token():
    batch = ts.RaggedBatch.from_sequences([[0]], [1], vocab_size=2)
    model = _model(2, 3, None, torch.float64, 1.0)
    fast, ref = ts.gradients(model, batch, fused=True), ts.gradients(model, batch, fused=False)
    assert torch.equal(fast.A, torch.zeros(2, dtype=torch.float64))  # one token: no score gradient
    assert _rel(fast.B, ref.B) <= 1e-15 and abs(fast.loss - ref.loss) <= 1e-15


def test_a_plan_keeps_32_bit_entries_in_blocks_that_cover_the_sequences_in_order():
    batch = _batch(4, n=200, vocab=300, max_len=40)
    plan = ts.models.core.entry_plan(batch)
    dt = batch.distinct()
    assert plan.ids.dtype == plan.counts.dtype == np.int32
    assert np.array_equal(plan.ids, dt.ids.numpy()) and np.array_equal(plan.counts, dt.counts.numpy())
    b = plan.blocks
    assert b[0] == 0 and b[-1] == 200 and np.all(np.diff(b) > 0) and b.size - 1 <= k.BLOCKS
    assert plan.max_entries == int(dt.offsets.diff().max())
    assert plan is ts.models.core.entry_plan(batch)  # computed once per batch
    tiny = ts.models.core.entry_plan(_batch(5, n=3, vocab=5, max_len=4))  # fewer sequences than blocks
    assert list(tiny.blocks) == sorted(set(tiny.blocks)) and tiny.blocks[-1] == 3


@pytest.mark.parametrize(
    "offsets, ids, counts, message",
    [
        ([0, 2, 3], [0, -1, 2], [1, 1, 1], "must be integers in"),  # the kernels index without bounds checks
        ([0, 2, 3], [0, 1, 5], [1, 1, 1], "must be integers in"),  # past the vocabulary
        ([0, 2, 3], [0.0, 1.5, 2.0], [1, 1, 1], "must be integers in"),
        ([0, 3, 2], [0, 1, 2], [1, 1, 1], "must rise"),
        ([0, 4, 3], [0, 1, 2], [1, 1, 1], "must rise"),  # falls: sequence 0 would read past the entries
        ([0, 0, 3], [0, 1, 2], [1, 1, 1], "must rise"),  # an empty sequence: the kernels read its top-scored entry
        ([1, 2, 3], [0, 1, 2], [1, 1, 1], "must rise"),
        ([0, 2], [0, 1, 2], [1, 1, 1], "must rise"),  # the last offset is not the number of entries
        ([0, 2, 3], [0, 1, 2], [1, 1], "one per entry"),
        ([0, 2, 3], [0, 1, 2], [1, 0.5, 2], "whole numbers"),
    ],
)
def test_an_entry_plan_refuses_what_the_kernels_would_read_out_of_bounds(offsets, ids, counts, message):
    with pytest.raises(ts.errors.InvalidBatchError, match=message):
        k.EntryPlan(np.array(offsets), np.array(ids), np.array(counts), 5)
    k.EntryPlan(np.array([0, 2, 3]), np.array([0, 4, 2]), np.ones(3), 5)  # in range: accepted


def test_fused_refused_where_it_does_not_apply():
    batch = _batch(5, n=10, vocab=7, max_len=5)
    model = _model(7, 3, None, torch.float64, 1.0)
    with pytest.raises(InvalidParameterError, match="fused=True"):
        ts.gradients(model, batch, stable=False, fused=True)
    # the naive form is the reference's, whatever fused says by default
    naive = ts.gradients(model, batch, stable=False)
    assert torch.equal(naive.A, ts.gradients(model, batch, stable=False, fused=False).A)


def test_a_nan_score_reaches_the_loss():
    batch = _batch(9, n=20, vocab=11, max_len=9)
    model = _model(11, 4, None, torch.float64, 1.0)
    model.E[3, 0] = float("nan")  # token 3 occurs in the batch
    assert 3 in set(batch.ids.tolist())
    g = ts.models.gradients.gradients_of_checked(model, batch, fused=True)  # unchecked: the loop relies on the loss
    assert np.isnan(g.loss) and torch.isnan(g.p).any()


def test_kernels_leave_torch_thread_count_alone():
    # numba's OpenMP pool would share torch's OpenMP runtime and reset its thread count at its first launch
    import numba

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        batch = _batch(6, n=50, vocab=9, max_len=8)
        ts.gradients(_model(9, 4, None, torch.float64, 1.0), batch, fused=True)
        assert torch.get_num_threads() == 1
        assert numba.threading_layer() == "workqueue" or "NUMBA_THREADING_LAYER" in __import__("os").environ
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("K,dtype,tol", CASES)
def test_evaluation_pass_equals_loss_and_accuracy(K, dtype, tol):
    # the training loop's test-set evaluation: one forward (the fused outputs for the one-layer models)
    batch = _batch(7, n=80, vocab=15, max_len=25, K=K)
    model = _model(15, 6, K, dtype, 3.0)
    loss, acc = _evaluate(model, batch)
    assert abs(loss - model.loss(batch)) <= tol * model.loss(batch) and acc == model.accuracy(batch)
    PV = torch.cat([model.p[:, None], model.v.reshape(6, -1)], 1)
    f = ts.models.core.fused_outputs(batch, ts.models.core.fused_scores_values(model.E, PV))
    assert f.shape == model.forward(batch).shape and _rel(f, model.forward(batch)) <= tol
    assert torch.equal(f, ts.gradients(model, batch, fused=True).f)  # the training step's outputs, bit for bit


def test_evaluation_pass_of_the_variants_and_of_other_models():
    data = ts.synthetic.independent_tokens(60, 12, length=(2, 9), delta=0.8, seed=8)
    for kind in ts.models.variants.KINDS:
        m = ts.models.variants.make(kind, 12, 6, seed=0, dtype=torch.float64)
        assert _evaluate(m, data.batch) == (m.loss(data.batch), m.accuracy(data.batch))

    other = SimpleNamespace(loss=lambda batch: 0.25, accuracy=lambda batch: 0.75)  # any model with the two
    assert _evaluate(other, data.batch) == (0.25, 0.75)


def test_the_vectorised_exp_is_accurate_and_keeps_a_nan():
    x = np.concatenate([np.linspace(-706.9, 0.0, 200_001), [-707.0, -800.0, -np.inf, -1e-300, 0.0, np.nan]])
    e = np.empty(x.size)
    k._exp_shifted(x[None, :], 0, 0.0, x.size, e)
    ok = x > -707.0
    assert np.max(np.abs(e[ok] - np.exp(x[ok])) / np.exp(x[ok])) < 5e-16
    assert np.all(e[(x <= -707.0)] == 0.0) and np.isnan(e[-1])
    e32 = np.empty(3)
    k._exp_shifted(np.array([[1.5, -2.25, 0.5]], dtype=np.float32), 0, 1.5, 3, e32)
    assert np.allclose(e32, np.exp(np.array([0.0, -3.75, -1.0])), rtol=1e-15)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-13), (np.float32, 1e-6)])
@pytest.mark.parametrize("S,d,r", [(1, 7, 2), (3, 19, 2), (37, 33, 5), (103, 2048, 5), (300, 64, 3)])
def test_the_products_with_E_equal_numpy_and_repeat_bitwise_across_threads(S, d, r, dtype, tol, monkeypatch):
    g = np.random.default_rng(S * d + r)
    E, AB, PV = (g.standard_normal(shape).astype(dtype) for shape in ((S, d), (S, r), (d, r)))
    E[0, : d // 2] = 0.0  # a row with zeros
    E64, AB64, PV64 = E.astype(np.float64), AB.astype(np.float64), PV.astype(np.float64)
    runs = []
    for threads in ("2", "1"):
        monkeypatch.setenv("TOKENSEL_THREADS", threads)
        runs.append((k.transposed_product(E, AB), k.scores_values(E, PV)))
    for got, ref in zip(runs[0], (AB64.T @ E64, E64 @ PV64), strict=True):
        assert got.dtype == dtype and np.abs(got - ref).max() <= tol * np.abs(ref).max()
    for a, b in zip(*runs, strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("r", [2, 5])  # the binary model's A p^T + B v^T, the four-class model's
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_adam_pass_is_adams_arithmetic_bit_for_bit(dtype, r):
    """40 steps of adam_low_rank equal Adam written in numpy in the kernel's order, bit for bit, over 9 decades."""
    g = np.random.default_rng(7)
    S, d, lr, (beta1, beta2), eps = 64, 40, 3e-2, (0.9, 0.999), 1e-8
    E = g.standard_normal((S, d)).astype(dtype)
    m, s = np.zeros_like(E), np.zeros_like(E)
    Er, mr, sr = E.copy(), m.copy(), s.copy()
    for step in range(1, 41):
        AB = (g.standard_normal((S, r)) * 10.0 ** g.integers(-6, 3)).astype(dtype)
        PV = g.standard_normal((r, d)).astype(dtype)
        k.adam_low_rank(E, m, s, AB, PV, step, lr, (beta1, beta2), eps)
        grad = AB[:, :1] * PV[0]
        for c in range(1, r):
            grad = grad + AB[:, c : c + 1] * PV[c]  # the terms in order of c, as the kernel forms each row
        bias1, bias2 = 1.0 - beta1**step, 1.0 - beta2**step
        b1, c1, b2, c2, size, bc2, ep = (
            dtype(x) for x in (beta1, 1 - beta1, beta2, 1 - beta2, lr / bias1, bias2**0.5, eps)
        )
        mr = mr * b1 + grad * c1
        sr = sr * b2 + grad * grad * c2
        Er = Er - size * mr / (np.sqrt(sr) / bc2 + ep)
        assert np.array_equal(E, Er) and np.array_equal(m, mr) and np.array_equal(s, sr), step


def _two_layer_case(kind, dtype, seed, scale=1.0):
    g = np.random.default_rng(seed)
    seqs = [g.integers(0, 19, size=g.integers(1, 12)) for _ in range(70)]
    seqs[0] = np.array([7])  # a lone token
    seqs[1] = np.array([3, 3, 3, 5, 3])  # a repeated token
    batch = ts.RaggedBatch.from_sequences(seqs, g.choice([-1, 1], size=70), vocab_size=23)  # 4 unused tokens
    m = ts.models.variants.make(kind, 23, 6, seed=seed, dtype=dtype)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        m.E.mul_(scale)  # scale 4: peaked layer-1 attention
        for w in m.matrices.values():  # away from the identity start, so W1 and W2 matter
            w.add_((0.3 * torch.randn(w.shape, generator=gen, dtype=torch.float64)).to(dtype))
        m.p.mul_(4.0)
    return batch, m


def _two_layer_grads(m, f):
    params = [m.E, m.p, *m.matrices.values()]
    loss = torch.nn.functional.softplus(-f).square().sum()  # any smooth function of every output
    return [loss.detach(), f.detach()] + list(torch.autograd.grad(loss, params))


@pytest.mark.parametrize("kind", ["two_layer", "two_layer_wkq"])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize("scale", [1.0, 4.0])
def test_two_layer_kernels_equal_the_reference_with_gradients(kind, dtype, tol, scale):
    batch, m = _two_layer_case(kind, dtype, seed=3, scale=scale)
    for t in [m.E, m.p, *m.matrices.values()]:
        t.requires_grad_(True)
    ids, mask = m.prepare(batch)
    assert ts.models.variants._kernel_plan(m, ids, mask) is not None  # the kernels run here
    fast = _two_layer_grads(m, m.forward_prepared(ids, mask))
    ref = _two_layer_grads(m, m._forward_tensors(ids, mask))
    written = _two_layer_grads(m, m.forward_reference(ids, mask))
    for a, b, c in zip(fast, ref, written, strict=True):
        assert a.dtype == b.dtype == dtype
        assert _rel(a, b) <= tol and _rel(a, c) <= tol
    assert fast[2][19:].abs().max() == 0  # unused tokens get no gradient
    with torch.no_grad():  # evaluation: the same outputs without keeping the attention
        assert _rel(m.forward(batch), ref[1]) <= tol


@pytest.mark.parametrize("kind", ["two_layer", "two_layer_wkq"])
def test_two_layer_kernels_bitwise_across_runs_and_threads(kind, monkeypatch):
    data = ts.synthetic.independent_tokens(400, 60, length=(5, 30), delta=0.8, seed=4)
    m = ts.models.variants.make(kind, 60, 8, seed=0)
    for t in [m.E, m.p, *m.matrices.values()]:
        t.requires_grad_(True)
    ids, mask = m.prepare(data.batch)
    runs = []
    for threads in ("2", "2", "1"):
        monkeypatch.setenv("TOKENSEL_THREADS", threads)
        runs.append(_two_layer_grads(m, m.forward_prepared(ids, mask)))
    for a, b, c in zip(*runs, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize(
    "ids, lengths, message",
    [
        ([[0, -1], [1, 0]], [2, 1], "must lie in"),  # a negative id: the kernels gather without bounds checks
        ([[0, 5], [1, 0]], [2, 1], "must lie in"),  # past the vocabulary
        ([[0, 1], [1, 0]], [2, 0], "lengths must be"),  # an empty row
        ([[0, 1], [1, 0]], [2, 3], "lengths must be"),  # longer than the padding
        ([[0, 1], [1, 0]], [2], "lengths must be"),
    ],
)
def test_a_two_layer_plan_refuses_what_the_kernels_would_read_out_of_bounds(ids, lengths, message):
    with pytest.raises(ts.errors.InvalidBatchError, match=message):
        k.TwoLayerPlan(np.array(ids), np.array(lengths), 5)
    k.TwoLayerPlan(np.array([[0, 4], [1, 0]]), np.array([2, 1]), 5)  # in range: accepted


def test_two_layer_kernels_apply_only_where_they_can():
    batch, m = _two_layer_case("two_layer", torch.float64, seed=5)
    ids, mask = m.prepare(batch)
    plan = ts.models.variants._kernel_plan
    assert plan(m, ids, mask) is not None
    holes, empty = mask.clone(), mask.clone()
    holes[2, 0], empty[0] = False, False  # not a prefix: the reference path; an empty row
    assert plan(m, ids, holes) is None and plan(m, ids, empty) is None and plan(m, ids[:, :0], mask[:, :0]) is None
    f = m.forward_prepared(ids, mask)
    assert torch.equal(m.forward_prepared(ids, holes), m._forward_tensors(ids, holes))
    assert not torch.equal(f, m._forward_tensors(ids, holes))


def test_token_order_sorts_occurrences_by_token_then_position():
    ids = np.array([[3, 1, 3, 0], [1, 9, 9, 9], [3, 3, 0, 0]])
    lengths = np.array([3, 1, 2])
    crow, slot = k.token_order(ids, lengths, 5)
    assert crow.tolist() == [0, 0, 2, 2, 6, 6]
    places = {(i, t): slot[i, t] for i in range(3) for t in range(lengths[i])}
    assert sorted(places.values()) == list(range(6))
    by_token = sorted(places, key=places.get)
    assert by_token == [(0, 1), (1, 0), (0, 0), (0, 2), (2, 0), (2, 1)]


_FORWARD_SCRIPT = """
import sys
import numpy as np
from tokensel.models import kernels
g = np.random.default_rng(0)
n, T, S, d = 400, 48, 600, 16
lengths = g.integers(20, T + 1, n)
ids = g.integers(0, S, (n, T)) * (np.arange(T)[None, :] < lengths[:, None])
X, R = (g.standard_normal((S, d)) / 2).astype(np.float32), g.standard_normal((S, 2)).astype(np.float32)
f, _, aux = kernels.two_layer_forward(kernels.TwoLayerPlan(ids, lengths, S), X, None, R, True)
M = int(lengths.sum())
plan = kernels.EntryPlan(np.concatenate([[0], np.cumsum(lengths)]), g.integers(0, S, M), g.integers(1, 4, M), S)
loss, F, AB = kernels.attention_grads(plan, g.standard_normal((S, 5)), g.integers(0, 4, n), True)
real = aux[np.arange(T)[None, :] < lengths[:, None]].ravel()
np.save(sys.argv[1], np.concatenate([f, real, [loss], F.ravel(), AB.ravel()]))
"""


def test_kernels_compiled_here_equal_the_kernels_loaded_from_the_cache(tmp_path):
    """Kernels compiled in the process and loaded from numba's cache give the same bits; only the first says so."""
    script = tmp_path / "forward.py"
    script.write_text(_FORWARD_SCRIPT)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "TOKENSEL_THREADS": "2"}
    runs, said = [], []
    for i in range(2):
        argv = [sys.executable, str(script), str(tmp_path / f"{i}.npy")]
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(np.load(tmp_path / f"{i}.npy"))
        said.append(done.stderr.count("compiling kernels, once, about a minute"))
    assert any((tmp_path / "cache").rglob("*.nbc"))  # the second process loaded what the first compiled
    assert np.array_equal(runs[0], runs[1])
    assert said == [1, 0]  # the first process says so once; the second, loading from the cache, is silent


def test_compile_script_calls_every_one_layer_kernel_in_both_dtypes():
    # a kernel scripts/compile_kernels.py misses is compiled inside a chapter's time: list what a fresh run compiled
    root = Path(__file__).resolve().parents[3]
    code = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("compile_kernels", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
script.compile_all(("one-layer",))
from tokensel.models import kernels as k
seen = {}
for name, f in vars(k).items():
    if hasattr(f, "signatures") and hasattr(f, "py_func"):
        seen[name] = sorted({str(a.dtype) for sig in f.signatures for a in sig if hasattr(a, "dtype")})
print(json.dumps(seen))
"""
    argv = [sys.executable, "-c", code, str(root / "scripts" / "compile_kernels.py")]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "TOKENSEL_PROGRESS": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    inner = {"_softplus", "_block", "_exp_shifted", "_weigh", "_weighted_sum", "_row_dot", "_form_row"}
    inner |= {"_rows", "_abt"}  # called by the kernels only
    two_layer = {"_two_layer_forward", "_two_layer_backward", "token_order", "_sum_by_token"}
    kernels = set(seen) - inner - two_layer
    assert kernels == {"_attention", "_scores", "_rows_product", "_adam"}
    for name in sorted(kernels):
        assert {"float64", "float32"} <= set(seen[name]), f"{name}: compiled for {seen[name] or 'nothing'}"
