"""Attention-weighted sums of embedding rows, ``z_i = sum_t q_t E_{x_t}``, as sparse products.

Over the distinct (sequence, token) entries of a batch (:meth:`RaggedBatch.distinct`), the
per-sequence mixtures are one sparse-dense product ``Z = Q E`` with ``Q`` (n x |S|) holding the
count-weighted attention of each entry. Its gradients are sparse too:

    dL/dE = Q^T G                     (a product with the transposed pattern)
    dL/dQ_{i,s} = G_i . E_s           (only at the entries of Q: a sampled product)

with ``G = dL/dZ``: O(entries x d) time and O(n d + |S| d) memory, where a padded (n x T x d) gather costs O(n T d)
of both (``benchmarks/bench_variants.py``). PyTorch's CSR kernels, on any device.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
import torch

from ..data.batch import RaggedBatch


@contextmanager
def _quiet_csr():
    # PyTorch prints "Sparse CSR tensor support is in beta state" once per process; the two
    # kernels used here are stable and tested against the dense computation in tests/tokensel/models/test_variants.py
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        yield


class MixPlan:
    """The sparsity pattern of a batch's distinct entries (rows: sequences, columns: vocabulary
    tokens) and of its transpose, computed once and reused by every step."""

    def __init__(self, batch: RaggedBatch):
        dt = batch.distinct()
        self.batch, self.entries = batch, dt
        self.shape = (batch.n, batch.vocab_size)
        self.perm = torch.argsort(dt.ids, stable=True)  # entries ordered by token, then sequence
        per_token = torch.bincount(dt.ids, minlength=batch.vocab_size)
        self.crow_t = torch.cat([per_token.new_zeros(1), torch.cumsum(per_token, 0)])
        self.col_t = dt.seg[self.perm]

    def matrix(self, values: torch.Tensor) -> torch.Tensor:
        """``Q`` (n x |S|, CSR) with the given per-entry values."""
        with _quiet_csr():
            return torch.sparse_csr_tensor(
                self.entries.offsets, self.entries.ids, values, self.shape, check_invariants=False
            )

    def matrix_t(self, values: torch.Tensor) -> torch.Tensor:
        """``Q^T`` (|S| x n, CSR) with the given per-entry values (in entry order)."""
        with _quiet_csr():
            return torch.sparse_csr_tensor(
                self.crow_t, self.col_t, values[self.perm], self.shape[::-1], check_invariants=False
            )


class _Mix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, E, plan):
        ctx.save_for_backward(q, E)
        ctx.plan = plan
        with _quiet_csr():
            return plan.matrix(q) @ E

    @staticmethod
    def backward(ctx, G):
        q, E = ctx.saved_tensors
        plan = ctx.plan
        G = G.contiguous()
        grad_q = grad_E = None
        with _quiet_csr():
            if ctx.needs_input_grad[0]:
                grad_q = torch.sparse.sampled_addmm(plan.matrix(torch.zeros_like(q)), G, E.T, beta=0.0).values()
            if ctx.needs_input_grad[1]:
                grad_E = plan.matrix_t(q) @ G
        return grad_q, grad_E, None


def mix(q: torch.Tensor, E: torch.Tensor, plan: MixPlan) -> torch.Tensor:
    """``Z = Q E`` (n x d) for per-entry weights ``q`` (in the order of ``plan.entries``), with the
    sparse gradients above under autograd."""
    return _Mix.apply(q, E, plan)


def entry_attention(scores: torch.Tensor, plan: MixPlan) -> torch.Tensor:
    """Per-entry attention weights ``q_t n_t`` (the softmax of the token ``scores`` (|S|) within each
    sequence, times the entry's count): the weights whose mixture is the attention output."""
    # index_select, not indexing: its backward is index_add, deterministic on the CPU, where the
    # backward of ``x[idx]`` (index_put with accumulation) sums in a varying order
    dt = plan.entries
    a = scores.index_select(0, dt.ids)
    n = plan.shape[0]
    amax = torch.full((n,), -torch.inf, dtype=a.dtype, device=a.device)
    amax = amax.scatter_reduce(0, dt.seg, a.detach(), reduce="amax")  # shift only: no gradient needed
    e = _Exp.apply(a - amax[dt.seg]) * dt.counts.to(a.dtype)
    Z = torch.zeros(n, dtype=a.dtype, device=a.device).index_add(0, dt.seg, e)
    return e / Z.index_select(0, dt.seg)


class _Exp(torch.autograd.Function):
    """``exp`` by numpy on the CPU, by torch elsewhere: torch's threaded CPU ``exp`` of float64 gave, on its first call
    in a few fresh processes, values off by parts in 10^9: results depended on the process."""

    @staticmethod
    def forward(ctx, x):
        e = torch.from_numpy(np.exp(x.detach().numpy())) if x.device.type == "cpu" else torch.exp(x)
        ctx.save_for_backward(e)
        return e

    @staticmethod
    def backward(ctx, grad):
        (e,) = ctx.saved_tensors
        return grad * e
