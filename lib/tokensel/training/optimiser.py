"""The training loop's optimiser: torch's fused CPU Adam without ``torch.optim.Optimizer`` around it.

:class:`FusedAdam` runs each step through ``torch.optim.adam.adam`` with ``fused=True``, the function that
``torch.optim.Adam(..., fused=True).step()`` calls, so its updates are bit for bit torch's. It keeps its state
as torch's optimiser does (``param_groups``, ``state``, the same :meth:`~FusedAdam.state_dict`), so a checkpoint
written with either loads into the other. What it leaves out is the optimiser class's machinery: building a
``torch.optim.Optimizer`` imports ``torch._dynamo`` (about two seconds in every process that trains), which a
full-batch loop on the CPU never uses.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import torch
from torch.optim.adam import adam as _adam

from ..errors import InvalidParameterError

#: a parameter group's entries, as ``torch.optim.Adam(params, lr=lr, fused=True)`` writes them in its state dict
GROUP_DEFAULTS = {
    "betas": (0.9, 0.999),
    "eps": 1e-08,
    "weight_decay": 0,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": True,
    "decoupled_weight_decay": False,
}


class FusedAdam:
    """Adam on the tensors ``params`` (floating point, distinct) with learning rate ``lr`` and torch's
    defaults otherwise (betas 0.9 and 0.999, eps 1e-8, no weight decay), one fused pass per tensor and step.

    :meth:`step` updates every parameter that has a ``.grad``; ``state[p]`` holds ``step`` (a float32 scalar),
    ``exp_avg`` and ``exp_avg_sq`` once ``p`` has taken a step, as torch's fused Adam keeps them (the loop's
    low-rank step on ``E`` writes there too).

    Used by :func:`tokensel.training.loop.adam`."""

    def __init__(self, params: list, lr: float):
        params = list(params)
        seen: set[int] = set()
        for i, p in enumerate(params):
            if not isinstance(p, torch.Tensor) or not p.is_floating_point():
                raise InvalidParameterError(f"params[{i}] must be a floating-point tensor")
            if id(p) in seen:
                raise InvalidParameterError(f"params[{i}] appears twice: pass each tensor once")
            seen.add(id(p))
        self.param_groups: list[dict] = [{"lr": float(lr), **copy.deepcopy(GROUP_DEFAULTS), "params": params}]
        self.state: defaultdict[torch.Tensor, dict] = defaultdict(dict)

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step of every parameter with a gradient, as ``torch.optim.Adam(..., fused=True).step()``."""
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:  # as torch's Adam starts a parameter's state
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if not params:
                continue
            beta1, beta2 = group["betas"]
            _adam(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                [],
                steps,
                foreach=group["foreach"],
                capturable=group["capturable"],
                differentiable=group["differentiable"],
                fused=group["fused"],
                grad_scale=None,
                found_inf=None,
                has_complex=False,
                decoupled_weight_decay=group["decoupled_weight_decay"],
                amsgrad=group["amsgrad"],
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=group["maximize"],
            )

    def _params(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> dict:
        """``{"state": {index: state}, "param_groups": [group with "params" as indices]}``, torch's layout (the
        tensors themselves, not copies, as torch returns them)."""
        index = {id(p): i for i, p in enumerate(self._params())}
        groups = [
            {**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
            for g in self.param_groups
        ]
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if s}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take over a state dict of this layout (this class's or ``torch.optim.Adam``'s): the same number of groups
        and of parameters in each; the moments copied in the parameters' dtype and device, the step counts as
        float32 on the parameters' device (as torch does for its fused Adam). Raises ValueError, changing
        nothing, on a dict that does not fit."""
        groups, saved = state_dict.get("param_groups"), state_dict.get("state")
        if not isinstance(groups, list) or not isinstance(saved, dict) or len(groups) != len(self.param_groups):
            raise ValueError("the state dict's parameter groups do not match this optimiser's")
        for g, mine in zip(groups, self.param_groups, strict=True):
            if not isinstance(g, dict) or len(g.get("params", ())) != len(mine["params"]):
                raise ValueError("a parameter group of the state dict has another number of parameters")
        params = self._params()
        state: defaultdict[torch.Tensor, dict] = defaultdict(dict)
        for key, entry in saved.items():
            if not isinstance(key, int) or not 0 <= key < len(params) or not isinstance(entry, dict):
                raise ValueError(f"the state dict holds state for a parameter {key!r} this optimiser does not have")
            if not all(isinstance(value, torch.Tensor) for value in entry.values()):
                raise ValueError(f"the state of parameter {key} holds something other than tensors")
            p = params[key]
            state[p] = {
                name: value.to(dtype=torch.float32, device=p.device)
                if name == "step"
                else value.to(dtype=p.dtype, device=p.device, copy=True)
                for name, value in entry.items()
            }
        self.param_groups = [
            {**copy.deepcopy({k: v for k, v in g.items() if k != "params"}), "params": mine["params"]}
            for g, mine in zip(groups, self.param_groups, strict=True)
        ]
        self.state = state
