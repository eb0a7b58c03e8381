"""Argument checks shared by every public function (in the spirit of scikit-learn's
``check_scalar`` / ``check_array``): validate first, then act.

Each helper returns the value in its canonical type, or raises an :mod:`tokensel.errors` exception whose
message names the argument, says what it got and what it needs. Nothing is coerced silently: a float
where an int is needed, a string where a list is needed or a boolean where a number is needed is refused
rather than truncated or iterated.
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path

import numpy as np
import torch

from .errors import ArgumentTypeError, InvalidArgumentError

MAX_ELEMENTS = 2**34  # the largest tensor a function will allocate on request (128 GiB in float64)
MAX_STEPS = 10**12  # more steps than any run can take: larger counts are typing errors

__all__ = [
    "check_int",
    "check_real",
    "check_bool",
    "check_choice",
    "check_path",
    "check_int_array",
    "check_real_array",
    "check_device",
]


def _short(value) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) >= 10**60:
        return f"an int of {int(value).bit_length()} bits"  # repr() refuses ints of more than 4,300 digits
    try:
        r = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still named by its type
        r = f"<{type(value).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."


def _scalar_tensor_problem(value, name: str):
    """A 0-d tensor that cannot give its number (on the meta device, complex): an ArgumentTypeError."""
    if isinstance(value, torch.Tensor) and (
        value.is_meta or value.ndim != 0 or value.is_complex() or value.layout != torch.strided
    ):
        where = "on the meta device (it has no value)" if value.is_meta else f"of shape {tuple(value.shape)}"
        return ArgumentTypeError(f"{name} must be a number, got a {value.dtype} tensor {where}")
    return None


def check_int(value, name: str, *, min: int | None = None, max: int | None = None, error=InvalidArgumentError) -> int:
    """``value`` as a Python int; refuses bools, floats (even ``2.0``), strings and tensors of other types."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        if (
            isinstance(value, torch.Tensor)
            and value.ndim == 0
            and not value.dtype.is_floating_point
            and value.dtype != torch.bool
            and not value.is_complex()
        ):
            problem = _scalar_tensor_problem(value, name)
            if problem:
                raise problem
            value = int(value.detach().cpu())
        else:
            raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__} {_short(value)}")
    value = int(value)
    if not -(2**63) <= value < 2**63:
        raise error(f"{name} = {_short(value)} is too large (it must fit in 64 bits)")
    if min is not None and value < min:
        raise error(f"{name} must be an int >= {min}, got {value}")
    if max is not None and value > max:
        raise error(f"{name} must be an int <= {max}, got {value}")
    return value


def check_real(
    value,
    name: str,
    *,
    min: float | None = None,
    max: float | None = None,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
    finite: bool = True,
    error=InvalidArgumentError,
) -> float:
    """``value`` as a Python float; refuses bools, strings, NaN (always) and inf (unless ``finite=False``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        if isinstance(value, torch.Tensor) and value.ndim == 0 and value.dtype != torch.bool and not value.is_complex():
            problem = _scalar_tensor_problem(value, name)
            if problem:
                raise problem
            value = value.detach().cpu()
            value = int(value) if not value.dtype.is_floating_point else float(value.double())
        elif isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
            value = value.item()
        else:
            raise ArgumentTypeError(f"{name} must be a real number, got {type(value).__name__} {_short(value)}")
    try:
        value = float(value)
    except OverflowError:  # an int of hundreds of digits
        raise error(f"{name} = {_short(value)} is too large for a floating-point number") from None
    if math.isnan(value):
        raise error(f"{name} must be a number, got NaN")
    if finite and math.isinf(value):
        raise error(f"{name} must be finite, got {value}")
    if min is not None and (value < min or (not min_inclusive and value == min)):
        raise error(f"{name} must be {'>=' if min_inclusive else '>'} {min}, got {value!r}")
    if max is not None and (value > max or (not max_inclusive and value == max)):
        raise error(f"{name} must be {'<=' if max_inclusive else '<'} {max}, got {value!r}")
    return value


def check_bool(value, name: str, *, allow_none: bool = False):
    """``value`` as a Python bool (``numpy.bool_`` accepted); refuses ints, strings and other truthy values."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.ndim == 0:
        return bool(value)
    raise ArgumentTypeError(
        f"{name} must be True or False{' (or None)' if allow_none else ''}, got {type(value).__name__} {_short(value)}"
    )


def check_choice(value, name: str, choices, error=InvalidArgumentError):
    """``value`` if it is one of ``choices`` (compared by equality, strings by exact spelling)."""
    if not isinstance(value, str) and all(isinstance(c, str) for c in choices):
        raise ArgumentTypeError(f"{name} must be one of {tuple(choices)}, got {type(value).__name__} {_short(value)}")
    if isinstance(value, str) and value in choices:
        return value
    if isinstance(value, str) or not any(value is c for c in choices):
        raise error(f"{name} must be one of {tuple(choices)}, got {_short(value)}")
    return value


def check_path(value, name: str, *, allow_none: bool = True):
    """``value`` as a ``pathlib.Path`` (a str or path-like), or None when allowed."""
    if value is None and allow_none:
        return None
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return Path(value)
    raise ArgumentTypeError(
        f"{name} must be a file path (str or pathlib.Path){' or None' if allow_none else ''}, "
        f"got {type(value).__name__} {_short(value)}"
    )


def _as_numpy(value, name: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            raise ArgumentTypeError(f"{name} is a tensor on the meta device: it has no values")
        if value.layout != torch.strided:
            raise ArgumentTypeError(f"{name} is a {value.layout} tensor: pass a dense one (.to_dense())")
        if value.is_complex():
            raise ArgumentTypeError(f"{name} must hold real numbers, got a {value.dtype} tensor")
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:  # numpy has no bfloat16: its values are exactly float32 ones
            value = value.float()
        return value.numpy()
    if isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{name} must be an array of numbers, got a {type(value).__name__}")
    if value is None:
        raise ArgumentTypeError(f"{name} must be an array of numbers, got None")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise InvalidArgumentError(f"{name} must be a rectangular array of numbers ({str(exc)[:80]})") from None
    if arr.dtype.kind == "u":
        if arr.size and arr.max() >= 2**63:
            raise InvalidArgumentError(f"{name} has values too large for 64-bit integers")
        arr = arr.astype(np.int64)
    return arr


def check_int_array(value, name: str, *, ndim: int | None = None, error=InvalidArgumentError) -> np.ndarray:
    """``value`` as an int64 numpy array; refuses float (even integer-valued), bool, object and string arrays."""
    arr = _as_numpy(value, name)
    if arr.size == 0 and arr.dtype.kind == "f":  # np.asarray([]) is float64: an empty list is fine
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"{name} must hold integers, got an array of dtype {arr.dtype}"
            + (": convert integer-valued floats explicitly with .astype(int)" if arr.dtype.kind == "f" else "")
        )
    if ndim is not None and arr.ndim != ndim:
        raise error(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def check_real_array(
    value, name: str, *, ndim: int | None = None, finite: bool = True, error=InvalidArgumentError
) -> np.ndarray:
    """``value`` as a float64 numpy array; refuses bool, object and string arrays, and NaN/inf when ``finite``."""
    arr = _as_numpy(value, name)
    if arr.dtype.kind not in "iuf":
        raise ArgumentTypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise error(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if finite and not np.all(np.isfinite(arr)):
        raise error(f"{name} contains NaN or inf")
    return arr


def check_device(value, name: str = "device") -> torch.device:
    """``value`` as a ``torch.device`` that this build of torch can use: a CUDA device on a build or a
    machine without CUDA, an index past the last GPU, or the meta device (no values) is refused."""
    if isinstance(value, bool) or not isinstance(value, (str, torch.device, int)):
        raise ArgumentTypeError(
            f"{name} must be a device such as 'cpu' or 'cuda', got {type(value).__name__} {_short(value)}"
        )
    try:
        dev = torch.device(value)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{name} = {_short(value)} is not a device ({str(exc)[:80]}); use 'cpu' or 'cuda'"
        ) from None
    if dev.type == "meta":
        raise InvalidArgumentError(f"{name} = 'meta' holds no values: use 'cpu' or 'cuda'")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidArgumentError(
                f"{name} = {str(dev)!r}, but this torch build or machine has no CUDA GPU "
                f"(torch {torch.__version__}): use 'cpu'"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InvalidArgumentError(f"{name} = {str(dev)!r}, but there are {torch.cuda.device_count()} GPU(s)")
    elif dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InvalidArgumentError(f"{name} = 'mps', but MPS is not available here: use 'cpu'")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise InvalidArgumentError(f"{name} = {str(dev)!r} is not supported: use 'cpu' or 'cuda'")
    return dev
