"""The loop's Adam: the fused kernel that ``torch.optim.Adam(fused=True).step()`` runs (``torch.optim.adam.adam``),
without ``torch.optim.Optimizer``, whose first use imports ``torch._dynamo``: 4 s of CPU time in every process that
trains, measured as 41 % of the own_data page's time and 23 % of chapter 5's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
from torch.optim.adam import adam


class FusedAdam:
    """Adam on ``params`` with learning rate ``lr`` and torch's defaults (betas 0.9 and 0.999, eps 1e-8): the same
    updates, bit for bit, as ``torch.optim.Adam(params, lr=lr, fused=True)``. ``param_groups`` and ``state`` are kept
    as torch's optimisers keep them (the loop's low-rank step on ``E`` updates its own entry there)."""

    def __init__(self, params: list, lr: float):
        self.param_groups: list[dict[str, Any]] = [
            {"params": list(params), "lr": lr, "betas": (0.9, 0.999), "eps": 1e-8}
        ]
        self.state: defaultdict[torch.Tensor, dict] = defaultdict(dict)

    @torch.no_grad()
    def step(self) -> None:
        """One step of every parameter with a ``.grad``."""
        group = self.param_groups[0]
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            if not self.state[p]:  # as torch starts a parameter's state
                zeros = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.state[p] = dict(
                    step=torch.zeros((), dtype=torch.float32, device=p.device), exp_avg=zeros, exp_avg_sq=zeros.clone()
                )
        states = [self.state[p] for p in params]
        beta1, beta2 = group["betas"]
        adam(
            params,
            [p.grad for p in params],
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            fused=True,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=0.0,
            eps=group["eps"],
            maximize=False,
            amsgrad=False,
        )

    def state_dict(self) -> list[dict]:
        """Each parameter's state (``{}`` before its first step), in the order of the parameters."""
        return [self.state.get(p, {}) for p in self.param_groups[0]["params"]]

    def load_state_dict(self, states: list[dict]) -> None:
        """Take over a :meth:`state_dict` of an optimiser of the same parameters (a checkpoint's)."""
        for p, s in zip(self.param_groups[0]["params"], states, strict=True):
            self.state[p] = dict(s)
