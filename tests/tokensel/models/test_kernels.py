"""The fused attention kernels (tokensel.models.kernels) against the reference implementation of tokensel.models.core:
binary and K-class, float64 and float32, length-1 sequences, repeated tokens, saturated scores;
bitwise determinism across runs and thread counts."""

import numba
import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidParameterError


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
    for name in ("f", "A", "B", "p", "v"):
        assert _rel(getattr(fast, name), getattr(ref, name)) <= tol, name
    assert _rel(fast.E, ref.E) <= tol
    assert fast.f.dtype == fast.A.dtype == fast.p.dtype == dtype
    assert fast.B.shape == ref.B.shape and fast.v.shape == ref.v.shape


def test_p_gradient_fused_equals_reference():
    batch = _batch(2, n=40, vocab=13, max_len=20)
    model = _model(13, 6, None, torch.float64, 2.0)
    w = model.E @ model.v
    loss, grad = ts.p_gradient(model.E, model.p, w, batch)
    ref = ts.models.core.score_value_grads(batch, model.E @ model.p, w)
    assert abs(float(loss) - float(ref.loss)) <= 1e-12 * float(ref.loss)
    assert _rel(grad, model.E.T @ ref.A) <= 1e-12
    assert loss.dtype == torch.float64 and loss.ndim == 0


@pytest.mark.parametrize("K", [None, 3])
def test_bitwise_deterministic_across_runs_threads_and_the_serial_path(K, monkeypatch):
    batch = _batch(3, n=500, vocab=50, max_len=60, K=K)
    model = _model(50, 8, K, torch.float64, 1.0)
    assert ts.models.core.entry_plan(batch).ids.size < ts.models.kernels.SERIAL_BELOW  # a small batch: one thread
    serial = ts.gradients(model, batch, fused=True)
    monkeypatch.setattr(ts.models.kernels, "SERIAL_BELOW", 0)  # the same batch through the thread pool
    monkeypatch.setenv("TOKENSEL_THREADS", "2")
    a, b = ts.gradients(model, batch, fused=True), ts.gradients(model, batch, fused=True)
    monkeypatch.setenv("TOKENSEL_THREADS", "1")
    c = ts.gradients(model, batch, fused=True)
    for name in ("f", "A", "B", "p", "v"):
        for other in (b, c, serial):
            assert torch.equal(getattr(a, name), getattr(other, name))
    assert a.loss == b.loss == c.loss == serial.loss


def test_one_sequence_of_one_token():
    batch = ts.RaggedBatch.from_sequences([[0]], [1], vocab_size=2)
    model = _model(2, 3, None, torch.float64, 1.0)
    fast, ref = ts.gradients(model, batch, fused=True), ts.gradients(model, batch, fused=False)
    assert torch.equal(fast.A, torch.zeros(2, dtype=torch.float64))  # one token: no score gradient
    assert _rel(fast.B, ref.B) <= 1e-15 and abs(fast.loss - ref.loss) <= 1e-15


def test_blocks_cover_the_sequences_in_order():
    batch = _batch(4, n=200, vocab=300, max_len=40)
    plan = ts.models.core.entry_plan(batch)
    b = plan.blocks
    assert b[0] == 0 and b[-1] == 200 and np.all(np.diff(b) > 0) and b.size - 1 <= ts.models.kernels.BLOCKS
    assert plan.max_entries == int(batch.distinct().offsets.diff().max())
    assert plan is ts.models.core.entry_plan(batch)  # computed once per batch
    tiny = ts.models.core.entry_plan(_batch(5, n=3, vocab=5, max_len=4))  # fewer sequences than blocks
    assert list(tiny.blocks) == sorted(set(tiny.blocks)) and tiny.blocks[-1] == 3


@pytest.mark.parametrize(
    "offsets, ids, message",
    [
        ([0, 2, 3], [0, -1, 2], "must lie in"),  # a negative id: the kernels index without wraparound
        ([0, 2, 3], [0, 1, 5], "must lie in"),  # past the vocabulary
        ([0, 3, 2], [0, 1, 2], "must rise"),
        ([0, 4, 3], [0, 1, 2], "must rise"),  # falls: sequence 0 would read past the entries
        ([0, 0, 3], [0, 1, 2], "must rise"),  # an empty sequence: the kernels read its top-scored entry
        ([1, 2, 3], [0, 1, 2], "must rise"),
        ([0, 2], [0, 1, 2], "must rise"),  # the last offset is not the number of entries
    ],
)
def test_an_entry_plan_refuses_ids_and_offsets_the_kernels_would_read_out_of_bounds(offsets, ids, message):
    with pytest.raises(ts.errors.InvalidBatchError, match=message):
        ts.models.kernels.EntryPlan(np.array(offsets), np.array(ids), np.ones(len(ids)), 5)
    ts.models.kernels.EntryPlan(np.array([0, 2, 3]), np.array([0, 4, 2]), np.ones(3), 5)  # in range: accepted
    with pytest.raises(ts.errors.InvalidBatchError, match="one per entry"):
        ts.models.kernels.EntryPlan(np.array([0, 2, 3]), np.array([0, 4, 2]), np.ones(2), 5)


@pytest.mark.parametrize("n", [300, 3000])  # the serial path, and the threads' (more than SERIAL_BELOW entries)
@pytest.mark.parametrize("K", [None, 4])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_plan_keeps_ids_and_whole_counts_in_32_bits_and_the_kernels_give_the_same_bits(n, K, dtype):
    batch = _batch(8, n=n, vocab=50, max_len=60, K=K)
    dt = batch.distinct()
    assert (n > 1000) == (dt.ids.numel() >= ts.models.kernels.SERIAL_BELOW)
    plan = ts.models.kernels.EntryPlan(dt.offsets.numpy(), dt.ids.numpy(), dt.counts.numpy(), batch.vocab_size)
    assert plan.ids.dtype == np.int32 and plan.counts.dtype == np.int32 and plan.counts_for(dtype) is plan.counts
    assert np.array_equal(plan.counts, dt.counts.numpy()) and np.array_equal(plan.ids, dt.ids.numpy())
    # the layout before: 64-bit ids, the counts in the model's dtype
    wide = ts.models.kernels.EntryPlan(dt.offsets.numpy(), dt.ids.numpy(), dt.counts.numpy(), batch.vocab_size)
    wide.ids, wide.counts = wide.ids.astype(np.int64), None
    wide._float_counts = {np.dtype(np.float64): dt.counts.numpy().astype(np.float64)}
    assert wide.counts_for(dtype).dtype == dtype
    CW = np.random.default_rng(0).standard_normal((batch.vocab_size, 2 if K is None else 1 + K)).astype(dtype)
    labels = batch.labels.numpy().astype(np.float64)
    a = ts.models.kernels.attention_grads(plan, CW, labels, K is not None)
    b = ts.models.kernels.attention_grads(wide, CW, labels, K is not None)
    assert a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    assert np.array_equal(ts.models.kernels.attention_outputs(plan, CW), ts.models.kernels.attention_outputs(wide, CW))


def test_counts_that_are_not_whole_or_past_float32s_integers_stay_in_the_models_dtype():
    offsets, ids = np.array([0, 2, 3]), np.array([0, 4, 2])
    for counts in (np.array([1.0, 0.5, 2.0]), np.array([1.0, 2.0**24 + 1, 2.0])):
        plan = ts.models.kernels.EntryPlan(offsets, ids, counts, 5)
        assert plan.counts is None
        assert plan.counts_for(np.float64).dtype == np.float64 and np.array_equal(plan.counts_for(np.float64), counts)
        assert np.array_equal(plan.counts_for(np.float32), counts.astype(np.float32))  # rounded there, as before
    assert ts.models.kernels.EntryPlan(offsets, ids, np.array([1.0, 2.0**24, 2.0]), 5).counts.dtype == np.int32
    with pytest.raises(ts.errors.InvalidBatchError, match="whole numbers"):
        ts.models.kernels.EntryPlan(offsets, ids + 0.5, np.ones(3), 5)


def test_fused_refused_where_it_does_not_apply():
    batch = _batch(5, n=10, vocab=7, max_len=5)
    model = _model(7, 3, None, torch.float64, 1.0)
    with pytest.raises(InvalidParameterError, match="fused=True"):
        ts.gradients(model, batch, stable=False, fused=True)
    with pytest.raises(InvalidParameterError, match="fused"):
        ts.gradients(model, batch, fused="yes")
    # the naive form is the reference's, whatever fused says by default
    naive = ts.gradients(model, batch, stable=False)
    assert torch.equal(naive.A, ts.gradients(model, batch, stable=False, fused=False).A)


# ---------------------------------------------------------------- the two-layer variants' kernels
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
        ([[0, -1], [1, 0]], [2, 1], "must lie in"),  # a negative id: the kernels gather without wraparound
        ([[0, 5], [1, 0]], [2, 1], "must lie in"),  # past the vocabulary
        ([[0, 1], [1, 0]], [2, 0], "lengths must be"),  # an empty row
        ([[0, 1], [1, 0]], [2, 3], "lengths must be"),  # longer than the padding
        ([[0, 1], [1, 0]], [2], "lengths must be"),
    ],
)
def test_a_two_layer_plan_refuses_what_the_kernels_would_read_out_of_bounds(ids, lengths, message):
    with pytest.raises(ts.errors.InvalidBatchError, match=message):
        ts.models.kernels.TwoLayerPlan(np.array(ids), np.array(lengths), 5)
    ts.models.kernels.TwoLayerPlan(np.array([[0, 4], [1, 0]]), np.array([2, 1]), 5)  # in range: accepted


def test_two_layer_kernels_apply_only_where_they_can():
    batch, m = _two_layer_case("two_layer", torch.float64, seed=5)
    ids, mask = m.prepare(batch)
    plan = ts.models.variants._kernel_plan
    assert plan(m, ids, mask) is not None
    holes = mask.clone()
    holes[2, 0] = False  # not a prefix: the reference path
    assert plan(m, ids, holes) is None
    assert plan(m, ids[:, :0], mask[:, :0]) is None
    empty = mask.clone()
    empty[0] = False
    assert plan(m, ids, empty) is None
    f = m.forward_prepared(ids, mask)
    assert torch.equal(m.forward_prepared(ids, holes), m._forward_tensors(ids, holes))
    assert not torch.equal(f, m._forward_tensors(ids, holes))


def test_token_order_sorts_occurrences_by_token_then_position():
    ids = np.array([[3, 1, 3, 0], [1, 9, 9, 9], [3, 3, 0, 0]])
    lengths = np.array([3, 1, 2])
    crow, slot = ts.models.kernels.token_order(ids, lengths, 5)
    assert crow.tolist() == [0, 0, 2, 2, 6, 6]
    places = {(i, t): slot[i, t] for i in range(3) for t in range(lengths[i])}
    assert sorted(places.values()) == list(range(6))
    by_token = sorted(places, key=places.get)
    assert by_token == [(0, 1), (1, 0), (0, 0), (0, 2), (2, 0), (2, 1)]


def test_vectorised_exp_is_accurate():
    x = np.concatenate([np.linspace(-706.9, 0.0, 200_001), [-707.0, -800.0, -np.inf, -1e-300, 0.0]])
    S = x[None, :]
    e = np.empty(x.size)
    ts.models.kernels._exp_shifted(S, 0, 0.0, x.size, e)
    ref = np.exp(x)
    ok = x > -707.0
    assert np.max(np.abs(e[ok] - ref[ok]) / ref[ok]) < 5e-16
    assert np.all(e[~ok] == 0.0)
    e32 = np.empty(3)
    ts.models.kernels._exp_shifted(np.array([[1.5, -2.25, 0.5]], dtype=np.float32), 0, 1.5, 3, e32)
    assert np.allclose(e32, np.exp(np.array([0.0, -3.75, -1.0])), rtol=1e-15)


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
    from tokensel.training.loop import _evaluate

    batch = _batch(7, n=80, vocab=15, max_len=25, K=K)
    model = _model(15, 6, K, dtype, 3.0)
    loss, acc = _evaluate(model, batch)
    assert abs(loss - model.loss(batch)) <= tol * model.loss(batch) and acc == model.accuracy(batch)
    PV = torch.cat([model.p[:, None], model.v.reshape(6, -1)], 1)
    f = ts.models.core.fused_outputs(batch, ts.models.core.fused_scores_values(model.E, PV))
    assert f.shape == model.forward(batch).shape and _rel(f, model.forward(batch)) <= tol
    assert torch.equal(f, ts.gradients(model, batch, fused=True).f)  # the training step's outputs, bit for bit


def test_evaluation_pass_of_the_variants_and_of_other_models():
    from tokensel.training.loop import _evaluate

    data = ts.synthetic.independent_tokens(60, 12, length=(2, 9), delta=0.8, seed=8)
    for kind in ts.models.variants.KINDS:
        m = ts.models.variants.make(kind, 12, 6, seed=0, dtype=torch.float64)
        assert _evaluate(m, data.batch) == (m.loss(data.batch), m.accuracy(data.batch))

    class Other:  # any model with loss and accuracy
        def loss(self, batch):
            return 0.25

        def accuracy(self, batch):
            return 0.75

    assert _evaluate(Other(), data.batch) == (0.25, 0.75)


# ---------------------------------------------------------------- the passes over E
@pytest.fixture(params=["one thread", "threads"])
def e_path(request, monkeypatch):
    """Each test of the passes over E runs twice: small tables as the library runs them (one thread, the serial
    kernels), and the same tables through the threaded kernels (SERIAL_E_BELOW at 0)."""
    if request.param == "threads":
        monkeypatch.setattr(ts.models.kernels, "SERIAL_E_BELOW", 0)
    return request.param


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-13), (np.float32, 1e-6)])
@pytest.mark.parametrize("S,r", [(3, 2), (37, 2), (103, 5)])  # fewer rows than blocks; rows not a multiple of 4
def test_transposed_product_with_and_without_grad_E(S, r, dtype, tol, monkeypatch, e_path):
    g = np.random.default_rng(S)
    E, AB, PVt = (g.standard_normal(shape).astype(dtype) for shape in ((S, 19), (S, r), (r, 19)))
    k = ts.models.kernels
    ref = AB.astype(np.float64).T @ E.astype(np.float64)
    out = np.full((S, 19), np.nan, dtype)
    monkeypatch.setenv("TOKENSEL_THREADS", "2")
    both, alone = k.transposed_product(E, AB, PVt, out), k.transposed_product(E, AB)
    assert both.dtype == alone.dtype == dtype and both.shape == (r, 19)
    assert np.abs(both - ref).max() <= tol * np.abs(ref).max()
    grad_E = AB.astype(np.float64) @ PVt.astype(np.float64)
    assert np.abs(out - grad_E).max() <= tol * np.abs(grad_E).max()
    assert np.array_equal(k.low_rank_product(AB, PVt, np.empty_like(out)), out)  # the same rows, written alone
    monkeypatch.setenv("TOKENSEL_THREADS", "1")
    assert np.array_equal(both, alone) and np.array_equal(alone, k.transposed_product(E, AB))  # bitwise, any threads


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("r", [1, 2, 3, 5, 6])  # 2 and 5 (binary, four classes): all columns in one loop
def test_transposed_product_adds_its_terms_in_the_documented_order_bitwise(r, dtype, threads, monkeypatch, e_path):
    # each of the ROW_BLOCKS blocks of rows adds (x0 r0 + x1 r1) + (x2 r2 + x3 r3) per four rows, then the rest one
    # by one, in float64; the blocks' sums are added in block order. numpy's element-wise operations in that order
    # give the same bits, whether the kernel loops over the columns or writes them out.
    monkeypatch.setenv("TOKENSEL_THREADS", threads)
    k = ts.models.kernels
    for S in (3, 37, 103, 250):  # fewer rows than blocks; blocks whose rows are not a multiple of 4
        g = np.random.default_rng(S + r)
        E, AB = g.standard_normal((S, 21)).astype(dtype), g.standard_normal((S, r)).astype(dtype)
        E64, AB64 = E.astype(np.float64), AB.astype(np.float64)
        nb = min(k.ROW_BLOCKS, S)
        R = np.zeros((nb, r, 21))
        for b in range(nb):
            s, hi = b * S // nb, (b + 1) * S // nb
            while s < hi:
                if s + 4 <= hi:
                    x, e = AB64[s : s + 4, :, None], E64[s : s + 4]
                    R[b] += (x[0] * e[0] + x[1] * e[1]) + (x[2] * e[2] + x[3] * e[3])
                    s += 4
                else:
                    R[b] += AB64[s, :, None] * E64[s]
                    s += 1
        expected = R.sum(axis=0).astype(dtype)
        assert np.array_equal(k.transposed_product(E, AB), expected)
        PVt = g.standard_normal((r, 21)).astype(dtype)
        assert np.array_equal(k.transposed_product(E, AB, PVt, np.empty_like(E)), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("r", [1, 2, 3, 4, 5, 6, 11])  # every group of columns the lane sums take (five at most)
def test_scores_equal_the_one_row_function_bitwise(r, dtype, monkeypatch, e_path):
    # scores_values takes blocks of rows (d a multiple of 16) or two rows at a time (other d); every dot product
    # must be the one-row function's, which the Adam pass uses for the next step's scores
    monkeypatch.setenv("TOKENSEL_THREADS", "2")
    k = ts.models.kernels
    acc = np.empty((r, ts.models.lanes.LANES))
    # odd S leaves a last row alone; 37 and 101 rows end in a partial block of 16; 2048 is IMDB's width
    for S, d in ((1, 7), (2, 33), (101, 19), (64, 256), (9, 2048), (37, 16), (101, 48), (3, 2000)):
        g = np.random.default_rng(S * d + r)
        E, PV = g.standard_normal((S, d)).astype(dtype), g.standard_normal((d, r)).astype(dtype)
        E[0, : d // 2] = 0.0  # a row with zeros
        PVt = np.ascontiguousarray(PV.T)
        expected = np.empty((S, r), dtype)
        for s in range(S):
            k._row_scores(E[s], PVt, expected[s], acc)
        assert np.array_equal(k.scores_values(E, PV), expected)


def _lane_order(E, PVt):
    """E PVt^T in the order of tokensel.models.lanes (d a multiple of 16), computed exactly: each of the 16 lanes a
    chain of fused multiply-adds in float64 (float64 rows) or of float32 products added in float64 (float32 rows),
    the lanes added as lanes_total documents."""
    from fractions import Fraction

    S, d = E.shape
    out = np.empty((S, PVt.shape[0]), E.dtype)
    for s in range(S):
        for c in range(PVt.shape[0]):
            a = [0.0] * 16
            for j in range(d):
                if E.dtype == np.float64:  # fma: the exact product plus the sum, rounded once
                    a[j % 16] = float(Fraction(float(E[s, j])) * Fraction(float(PVt[c, j])) + Fraction(a[j % 16]))
                else:
                    a[j % 16] = a[j % 16] + float(np.float32(E[s, j]) * np.float32(PVt[c, j]))
            if E.dtype == np.float64:
                v = [(a[q] + a[q + 4]) + (a[q + 8] + a[q + 12]) for q in range(4)]
            else:
                v = [((a[q] + a[q + 4]) + a[q + 8]) + a[q + 12] for q in range(4)]
            out[s, c] = (v[0] + v[2]) + (v[1] + v[3])
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scores_follow_the_documented_lane_order_bitwise(dtype, monkeypatch, e_path):
    # where d is a multiple of 16 the order of every addition of E [p, V] is written out (tokensel.models.lanes), not
    # left to the compiler: an exact computation of that order gives the same bits, on any machine
    monkeypatch.setenv("TOKENSEL_THREADS", "2")
    g = np.random.default_rng(3)
    for S, d, r in ((3, 32, 5), (20, 48, 2), (17, 16, 6)):
        E, PV = g.standard_normal((S, d)).astype(dtype), g.standard_normal((d, r)).astype(dtype)
        assert np.array_equal(ts.models.kernels.scores_values(E, PV), _lane_order(E, np.ascontiguousarray(PV.T)))


@numba.njit
def _four_lane_sum(x, W, c, ref, L):
    return ts.models.lanes.four_lane_sum(x, W, c, ref, L)


@numba.njit
def _weigh_and_sum(e, counts, lo, W, refs, L):
    one = ts.models.lanes.weigh_and_sum(e.copy(), counts, lo, W, refs, L, 1)
    return one, ts.models.lanes.weigh_and_sum(e, counts, lo, W, refs, L, 4)


@numba.njit
def _add_scaled_four(P, row, G, x):
    ts.models.lanes.add_scaled_four(P, row, G, x)


def _four_lanes(terms):
    """The terms added in four lanes (j mod 4; those past the last whole four to lane 0), then (s0 + s1) + (s2 + s3)."""
    s = [0.0] * 4
    whole = len(terms) // 4 * 4
    for j, t in enumerate(terms[:whole]):
        s[j % 4] += t
    for t in terms[whole:]:
        s[0] += t
    return (s[0] + s[1]) + (s[2] + s[3])


@pytest.mark.parametrize("counts_dtype", [np.int32, np.int64, np.float32, np.float64])
def test_attention_lane_sums_follow_the_documented_order_bitwise(counts_dtype):
    # the attention pass's sums as vectors (tokensel.models.lanes): each term rounded as the scalar code rounds it,
    # the lanes and the tail in the documented order, for every length up to past three vectors
    g = np.random.default_rng(5)
    for L in range(14):
        W = g.standard_normal((5, L + 2))
        x, refs, lo = g.random(L + 2), g.standard_normal(4), 2
        counts = (g.integers(1, 9, L + lo) + (0.25 if counts_dtype in (np.float32, np.float64) else 0)).astype(
            counts_dtype
        )
        expected = _four_lanes([x[j] * (W[2, j] - refs[0]) for j in range(L)])
        assert _four_lane_sum(x, W, 2, refs[0], L) == expected
        e = x.copy()
        weights = [float(x[j]) * float(counts[lo + j]) for j in range(L)]
        one, four = _weigh_and_sum(e, counts, lo, W, refs, L)
        assert np.array_equal(e[:L], weights) and np.array_equal(e[L:], x[L:])
        sums = [_four_lanes([w * (W[1 + c, j] - refs[c]) for j, w in enumerate(weights)]) for c in range(4)]
        assert four == (_four_lanes(weights), *sums) and one == (_four_lanes(weights), sums[0])


def test_scaled_row_added_as_one_vector_equals_four_scalar_updates_bitwise():
    g = np.random.default_rng(6)
    P, G = g.standard_normal((7, 5)), g.standard_normal(4)
    expected = P.copy()
    for c in range(4):
        expected[3, 1 + c] += G[c] * 0.37
    _add_scaled_four(P, np.uint64(3), G, 0.37)
    assert np.array_equal(P, expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("r", [1, 2, 3, 5, 6])  # 2 and 5 (binary, four classes) are written out term by term
def test_grad_E_rows_add_their_terms_in_order_bitwise(r, dtype, e_path):
    # row s of AB PVt is ((AB[s, 0] PVt[0] + AB[s, 1] PVt[1]) + ...), each product and sum rounded in turn, whether
    # the kernel loops over the terms or writes them out; the Adam pass of the K-class model forms them alike
    g = np.random.default_rng(r)
    AB, PVt = g.standard_normal((41, r)).astype(dtype), g.standard_normal((r, 23)).astype(dtype)
    expected = AB[:, :1] * PVt[0]
    for c in range(1, r):
        expected = expected + AB[:, c : c + 1] * PVt[c]
    assert np.array_equal(ts.models.kernels.low_rank_product(AB, PVt, np.empty((41, 23), dtype)), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_small_tables_take_the_serial_kernels_and_large_ones_the_threads(dtype, monkeypatch):
    # which kernel runs is decided by the table's size alone (SERIAL_E_BELOW entries), and both give the same bits
    k = ts.models.kernels
    monkeypatch.setenv("TOKENSEL_THREADS", "2")
    called = []
    for name in ("_rows_product", "_rows_product_serial", "_score_rows", "_score_rows_serial"):
        kernel = getattr(k, name)
        monkeypatch.setattr(k, name, lambda *a, _k=kernel, _n=name: (called.append(_n), _k(*a))[1])
    for name in ("_low_rank_rows", "_low_rank_rows_serial"):
        kernel = getattr(k, name)
        monkeypatch.setattr(k, name, lambda *a, _k=kernel, _n=name: (called.append(_n), _k(*a))[1])
    g = np.random.default_rng(7)
    d = 2048
    for S in (3, k.SERIAL_E_BELOW // d - 1, k.SERIAL_E_BELOW // d + 1):
        E, AB, PVt = (g.standard_normal(shape).astype(dtype) for shape in ((S, d), (S, 2), (2, d)))
        results = {}
        for below in (k.SERIAL_E_BELOW, 0, 10**12):  # as the library decides; always threads; always one thread
            monkeypatch.setattr(k, "SERIAL_E_BELOW", below)
            called.clear()
            out = np.empty_like(E)
            product = k.transposed_product(E, AB, PVt, out)
            scores = k.scores_values(E, PVt.T)
            grad_E = k.low_rank_product(AB, PVt, np.empty_like(E), stream=False)
            results[below] = (product, out, scores, grad_E, tuple(called))
            monkeypatch.setattr(k, "SERIAL_E_BELOW", 2**16)
        serial = ("_rows_product_serial", "_score_rows_serial", "_low_rank_rows_serial")
        assert results[10**12][4] == serial and results[0][4] == ("_rows_product", "_score_rows", "_low_rank_rows")
        assert results[2**16][4] == (serial if E.size < 2**16 else results[0][4])
        for a, b, c in zip(results[2**16][:4], results[0][:4], results[10**12][:4], strict=True):
            assert np.array_equal(a, b) and np.array_equal(a, c), "the serial and the threaded kernels differ"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("r", [2, 3, 5])
@pytest.mark.parametrize("S", [5, 37])  # fewer rows than blocks, and more
def test_grad_E_streamed_is_bitwise_the_grad_E_written_in_cache(S, r, dtype, monkeypatch):
    # the non-temporal stores write the rows _form_row formed in a buffer: the same bits, every row written (the
    # output starts as NaN), in an output torch allocates 64-byte aligned, rows of 2 x 64 bytes
    k = ts.models.kernels
    g = np.random.default_rng(S * r)
    d = 128 // np.dtype(dtype).itemsize
    AB, PVt = g.standard_normal((S, r)).astype(dtype), g.standard_normal((r, d)).astype(dtype)
    expected = k.low_rank_product(AB, PVt, np.empty((S, d), dtype), stream=False)
    out = torch.full((S, d), float("nan"), dtype=torch.from_numpy(AB).dtype).numpy()
    assert out.ctypes.data % 64 == 0
    monkeypatch.setenv("TOKENSEL_THREADS", "2")
    assert np.array_equal(k.low_rank_product(AB, PVt, out, stream=True), expected)
    # by default only from STREAM_FROM bytes on: with the threshold at 0, this output streams too
    monkeypatch.setattr(k, "STREAM_FROM", 0)
    assert k.streams(out) and not k.streams(np.empty((S, d - 1), dtype))
    out[:] = np.nan
    assert np.array_equal(k.low_rank_product(AB, PVt, out), expected)


def test_grad_E_streamed_refuses_an_output_its_stores_cannot_write():
    k = ts.models.kernels
    AB, PVt = np.ones((4, 2)), np.ones((2, 8))
    base = torch.zeros(4 * 8 + 1, dtype=torch.float64).numpy()
    shifted = base[1:].reshape(4, 8)  # rows 8 bytes off the 64-byte boundary
    with pytest.raises(
        ts.errors.InvalidArgumentError,
        match="stream=True: out must start on a 64-byte boundary, it starts 8 bytes past one",
    ):
        k.low_rank_product(AB, PVt, shifted, stream=True)
    assert np.all(shifted == 0)  # refused before anything was written
    assert not k.streams(shifted)
    assert np.array_equal(k.low_rank_product(AB, PVt, shifted), np.full((4, 8), 2.0))  # written in cache instead
    odd = torch.zeros(4, 6, dtype=torch.float64).numpy()  # rows of 48 bytes
    with pytest.raises(ts.errors.InvalidArgumentError, match="rows must hold a whole number of 64 bytes, they hold 48"):
        k.low_rank_product(np.ones((4, 2)), np.ones((2, 6)), odd, stream=True)
    # a read-only output (as a memory-mapped file is) is never streamed into: refused with stream=True
    frozen = torch.zeros(4, 8, dtype=torch.float64).numpy()
    frozen.setflags(write=False)
    with pytest.raises(ts.errors.InvalidArgumentError, match="C-contiguous and writeable"):
        k.low_rank_product(AB, PVt, frozen, stream=True)
    assert not k.streams(frozen) and np.all(frozen == 0)
    with pytest.raises(ts.errors.ArgumentTypeError, match="stream must be True, False or None, got 'yes'"):
        k.low_rank_product(AB, PVt, torch.zeros(4, 8, dtype=torch.float64).numpy(), stream="yes")
    assert not k.streams([[0.0] * 8] * 4) and not k.streams(torch.zeros(4, 8, dtype=torch.complex128).numpy())


def test_stream_threshold_reads_the_level_3_cache_size(tmp_path):
    # the layout of Linux's /sys/devices/system/cpu/cpu0/cache: index0..3, each with its level and size
    k = ts.models.kernels
    for index, (level, size) in enumerate([("1", "48K"), ("1", "32K"), ("2", "2048K"), ("3", "266240K")]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "level").write_text(level + "\n")
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    assert k._last_level_cache(str(tmp_path)) == 266240 * 2**10
    (tmp_path / "index3" / "size").write_text("32M\n")
    assert k._last_level_cache(str(tmp_path)) == 32 * 2**20
    (tmp_path / "index3" / "size").write_text("large\n")
    assert k._last_level_cache(str(tmp_path)) is None  # unreadable: not known
    (tmp_path / "index3" / "level").write_text("2\n")
    assert k._last_level_cache(str(tmp_path)) is None  # no level-3 cache
    assert k._last_level_cache(str(tmp_path / "absent")) is None


@pytest.mark.parametrize("K,dtype,tol", CASES)
def test_fused_grad_E_written_by_the_kernel_equals_the_reference(K, dtype, tol):
    batch = _batch(8, n=60, vocab=17, max_len=30, K=K)
    model = _model(17, 8, K, dtype, 2.0)
    fast, ref = ts.gradients(model, batch, fused=True), ts.gradients(model, batch, fused=False)
    buf = torch.full_like(model.E, float("nan"))
    assert fast.E_into(buf) is buf and _rel(buf, ref.E) <= tol and torch.equal(fast.E, buf)
    strided = torch.empty(8, 17, dtype=dtype).T  # not C-contiguous: torch's product writes it
    assert _rel(fast.E_into(strided), ref.E) <= tol


@pytest.mark.parametrize("K,dtype,tol", CASES)
def test_grad_E_into_a_large_buffer_is_streamed_and_the_same(K, dtype, tol, monkeypatch):
    # E_into's torch buffer streams once it is at least STREAM_FROM bytes (here set to 0): the streamed kernel runs,
    # and writes the bits the cached write gives
    k = ts.models.kernels
    batch = _batch(8, n=60, vocab=17, max_len=30, K=K)
    model = _model(17, 32, K, dtype, 2.0)  # rows of 128 or 256 bytes
    g = ts.gradients(model, batch, fused=True)
    cached = g.E_into(torch.full_like(model.E, float("nan")))
    calls = []
    streamed_kernel = k._low_rank_rows_streamed
    monkeypatch.setattr(k, "_low_rank_rows_streamed", lambda *a: calls.append(1) or streamed_kernel(*a))
    monkeypatch.setattr(k, "STREAM_FROM", 0)
    streamed = g.E_into(torch.full_like(model.E, float("nan")))
    assert calls == [1] and torch.equal(streamed, cached)
    assert _rel(streamed, ts.gradients(model, batch, fused=False).E) <= tol


def test_a_nan_score_reaches_the_loss():
    batch = _batch(9, n=20, vocab=11, max_len=9)
    model = _model(11, 4, None, torch.float64, 1.0)
    model.E[3, 0] = float("nan")  # token 3 occurs in the batch
    assert 3 in set(batch.ids.tolist())
    g = ts.models.gradients.gradients_of_checked(model, batch, fused=True)  # unchecked: the loop relies on the loss
    assert np.isnan(g.loss) and torch.isnan(g.p).any()


@pytest.mark.parametrize("K", [4, None])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("serial", [True, False])
def test_written_out_kernels_equal_the_general_loops_bitwise(K, dtype, serial, monkeypatch):
    # UNROLLED_CLASSES = 4 writes the four-class kernels out class by class, and the binary model's gather; 0 takes
    # the general loops everywhere
    batch = _batch(4, n=400, vocab=40, max_len=50, K=K)
    model = _model(40, 8, K, dtype, 3.0)
    if not serial:
        monkeypatch.setattr(ts.models.kernels, "SERIAL_BELOW", 0)
        monkeypatch.setenv("TOKENSEL_THREADS", "2")
    assert ts.models.kernels.UNROLLED_CLASSES == 4
    PV = torch.cat([model.p[:, None], model.v if K else model.v[:, None]], 1)
    written = ts.gradients(model, batch, fused=True)
    out_written = ts.models.core.fused_outputs(batch, model.E @ PV)
    monkeypatch.setattr(ts.models.kernels, "UNROLLED_CLASSES", 0)
    loops = ts.gradients(model, batch, fused=True)
    out_loops = ts.models.core.fused_outputs(batch, model.E @ PV)
    assert written.loss == loops.loss
    for name in ("f", "A", "B", "p", "v", "E"):
        assert torch.equal(getattr(written, name), getattr(loops, name)), name
    assert torch.equal(out_written, out_loops)


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
np.save(sys.argv[1], np.concatenate([f, aux[np.arange(T)[None, :] < lengths[:, None]].ravel()]))
"""


def test_two_layer_forward_compiled_here_equals_the_forward_loaded_from_the_cache(tmp_path):
    """Once compiled in the process and once loaded from numba's cache (an empty cache folder, two processes), the
    same bits: a reader's first build compiles the kernels, every later one loads them."""
    import os
    import subprocess
    import sys

    script = tmp_path / "forward.py"
    script.write_text(_FORWARD_SCRIPT)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "TOKENSEL_THREADS": "2"}
    runs = []
    for k in range(2):
        subprocess.run([sys.executable, str(script), str(tmp_path / f"{k}.npy")], env=env, check=True, timeout=600)
        runs.append(np.load(tmp_path / f"{k}.npy"))
    assert any((tmp_path / "cache").rglob("*.nbc"))  # the second process loaded what the first compiled
    assert np.array_equal(runs[0], runs[1])


# --- Adam's division by its bias correction: a reciprocal and one fused correction, the bits of the division ---


def _quotients_of(k):
    import numba

    @numba.njit
    def quotients(x, c, inv, out):
        for i in range(x.size):
            out[i] = k._over(x[i], c, inv)

    return quotients


def _divisors(dtype):
    """Adam's bias corrections sqrt(1 - beta2^t) for several beta2 and t, and divisors at the edges of a binade."""
    cs = [
        np.sqrt(1.0 - b2**t) for b2 in (0.5, 0.9, 0.99, 0.999, 0.9999, 1 - 1e-12) for t in (1, 2, 3, 7, 50, 300, 10**4)
    ]
    cs += [1.0, np.nextafter(1.0, 0.0), 0.5, np.nextafter(0.5, 0.0), np.nextafter(0.5, 1.0), 1e-8]
    return sorted({dtype(c) for c in cs if dtype(c) > 0})


@pytest.mark.parametrize("dtype, uint", [(np.float64, np.uint64), (np.float32, np.uint32)])
def test_division_by_a_fixed_divisor_is_the_correctly_rounded_quotient(dtype, uint):
    """_over(x, c, 1/c) gives x / c bit for bit for x the square root of any float >= 0 (Adam's sqrt(s)): positive
    floats drawn uniformly over their bit patterns (every binade, subnormals included), 0, inf and NaN."""
    k = ts.models.kernels
    quotients = _quotients_of(k)
    g = np.random.default_rng(25)
    top = np.array(np.finfo(dtype).max, dtype).view(uint)
    s = g.integers(1, int(top) + 1, 200_000, dtype=uint).view(dtype)
    x = np.concatenate([np.sqrt(s), np.array([0.0, np.inf, np.nan, np.finfo(dtype).smallest_subnormal], dtype)])
    x[-1] = np.sqrt(x[-1])  # the smallest square root of a positive float
    out = np.empty_like(x)
    for c in _divisors(dtype):
        quotients(x, c, dtype(1) / c, out)
        with np.errstate(over="ignore"):
            expected = x / c
        assert np.array_equal(out.view(uint), expected.view(uint)), f"c = {c!r}"
    assert np.isnan(out[-2]) and out[-3] == np.inf


def test_fused_multiply_add_is_used_only_for_the_host_cpu(monkeypatch):
    """_over corrects by llvm.fma only where numba compiles for this host's CPU (a named CPU may lack it: then a
    plain division)."""
    k = ts.models.kernels
    import numba

    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert k._fma_in_hardware() is False
    monkeypatch.setattr(numba.config, "CPU_NAME", None)
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+sse2")
    assert k._fma_in_hardware() is False


@pytest.mark.parametrize("r", [2, 5])  # the binary model's A p^T + B v^T (one loop) and the four-class model's
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_adam_pass_is_its_arithmetic_with_true_divisions_bit_for_bit(dtype, r):
    """E, m and s after 40 steps of adam_low_rank equal, bit for bit, Adam's update written in numpy in the kernel's
    order with both divisions true divisions: the division by the bias correction done by a reciprocal and one
    fused correction changes no bit. The gradients' scales range over nine orders of magnitude."""
    k = ts.models.kernels
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


def test_compile_script_calls_every_one_layer_kernel_in_both_dtypes():
    # make book compiles the kernels beside its first chapters and CI before its tests (scripts/compile_kernels.py):
    # a kernel the script misses is compiled by the first chapter that needs it, inside that chapter's time. A fresh
    # process runs the script's one-layer part and lists, per kernel, the dtypes of what it compiled or loaded.
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

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
    if hasattr(f, "signatures") and hasattr(f, "py_func") and f.targetoptions.get("inline") != "always":
        seen[name] = sorted({str(a.dtype) for sig in f.signatures for a in sig if hasattr(a, "dtype")})
print(json.dumps(seen))
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(root / "scripts" / "compile_kernels.py")],
        capture_output=True,
        text=True,
        env={**os.environ, "TOKENSEL_PROGRESS": "0"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # called by the kernels only
    inner = {"_softplus", "_sum_token", "_row_scores", "_row_scores_loop", "_two_rows_scores", "_block", "_exp_shifted"}
    inner |= {"_four_of", "_four_terms"}
    two_layer = {"_two_layer_forward", "_two_layer_backward", "token_order", "_sum_by_token"}
    kernels = set(seen) - inner - two_layer
    assert {"_entries", "_entries_serial", "_rows_product", "_rows_product_serial", "_adam_rank2"} <= kernels
    for name in sorted(kernels):
        assert {"float64", "float32"} <= set(seen[name]), f"{name}: compiled for {seen[name] or 'nothing'}"
