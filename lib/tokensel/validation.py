"""Argument checks at the boundary: ``@declare(steps=Int(min=1), ...)`` checks the arguments of a function that
a chapter, a script or a user calls before its body runs, and hands the body their canonical value (an int, a
float, a ``Path``, an int64 or float64 array): never coercion (``2.0`` is not an int). A problem raises
:class:`~tokensel.errors.InvalidArgumentError` naming the argument (a wrong type, its ``TypeError`` subclass
:class:`~tokensel.errors.ArgumentTypeError`). A named dimension (``"S"``) is bound by the first argument that has
it. ``tests/tokensel/test_declared.py`` tries bad values on every declared function. Internal functions trust
callers."""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from .errors import ArgumentTypeError, InvalidArgumentError, TokenselError

MAX_ELEMENTS = 2**34  # the largest tensor a function will allocate on request (128 GiB in float64)
MAX_STEPS = 10**12  # more steps than any run can take: larger counts are typing errors


def _short(value) -> str:
    try:
        r = repr(value)
    except Exception:  # noqa: BLE001 - an int of 5,000 digits, say: still named by its type
        r = f"<{type(value).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."


def _got(value) -> str:
    return f"got {type(value).__name__} {_short(value)}"


def _scalar(value: torch.Tensor, name: str, what: str):
    if value.is_meta or value.ndim != 0 or value.is_complex() or value.layout != torch.strided:
        where = "on the meta device (it has no value)" if value.is_meta else f"of shape {tuple(value.shape)}"
        raise ArgumentTypeError(f"{name} must be {what}, got a {value.dtype} tensor {where}")
    value = value.detach().cpu()
    return float(value.double()) if value.dtype.is_floating_point else int(value)


def check_int(value, name: str, *, min: int | None = None, max: int | None = None) -> int:
    """``value`` as a Python int; bools, floats (even ``2.0``), strings and float tensors refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        if not (isinstance(value, torch.Tensor) and not value.dtype.is_floating_point and value.dtype != torch.bool):
            raise ArgumentTypeError(f"{name} must be an int, {_got(value)}")
        value = _scalar(value, name, "an int")
    value = int(value)
    if not -(2**63) <= value < 2**63:
        raise InvalidArgumentError(f"{name} = {_short(value)} is too large (it must fit in 64 bits)")
    if min is not None and value < min:
        raise InvalidArgumentError(f"{name} must be an int >= {min}, got {value}")
    if max is not None and value > max:
        raise InvalidArgumentError(f"{name} must be an int <= {max}, got {value}")
    return value


def check_real(value, name: str, *, min=None, max=None, min_inclusive=True, max_inclusive=True, finite=True) -> float:
    """``value`` as a Python float; bools, strings, NaN (always) and inf (unless ``finite=False``) refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        if isinstance(value, torch.Tensor) and value.dtype != torch.bool:
            value = _scalar(value, name, "a number")
        elif isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
            value = value.item()
        else:
            raise ArgumentTypeError(f"{name} must be a real number, {_got(value)}")
    try:
        value = float(value)
    except OverflowError:  # an int of hundreds of digits
        raise InvalidArgumentError(f"{name} = {_short(value)} is too large for a floating-point number") from None
    if math.isnan(value):
        raise InvalidArgumentError(f"{name} must be a number, got NaN")
    if finite and math.isinf(value):
        raise InvalidArgumentError(f"{name} must be finite, got {value}")
    if min is not None and (value < min or (not min_inclusive and value == min)):
        raise InvalidArgumentError(f"{name} must be {'>=' if min_inclusive else '>'} {min}, got {value!r}")
    if max is not None and (value > max or (not max_inclusive and value == max)):
        raise InvalidArgumentError(f"{name} must be {'<=' if max_inclusive else '<'} {max}, got {value!r}")
    return value


def check_choice(value, name: str, choices):
    """``value`` if it is one of ``choices`` (strings by exact spelling, other values by identity)."""
    if not isinstance(value, str) and all(isinstance(c, str) for c in choices):
        raise ArgumentTypeError(f"{name} must be one of {tuple(choices)}, {_got(value)}")
    if (value in choices) if isinstance(value, str) else any(value is c for c in choices):
        return value
    raise InvalidArgumentError(f"{name} must be one of {tuple(choices)}, got {_short(value)}")


def _dense(value: torch.Tensor, name: str) -> torch.Tensor:
    if value.is_meta:
        raise ArgumentTypeError(f"{name} is a tensor on the meta device: it has no values")
    if value.layout != torch.strided:
        raise ArgumentTypeError(f"{name} is a {value.layout} tensor: pass a dense one (.to_dense())")
    return value


def _as_numpy(value, name: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        if _dense(value, name).is_complex():
            raise ArgumentTypeError(f"{name} must hold real numbers, got a {value.dtype} tensor")
        value = value.detach().cpu()
        return (value.float() if value.dtype == torch.bfloat16 else value).numpy()  # numpy has no bfloat16
    if value is None or isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{name} must be an array of numbers, got {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise InvalidArgumentError(f"{name} must be a rectangular array of numbers ({str(exc)[:80]})") from None
    if arr.dtype.kind == "u":
        if arr.size and arr.max() >= 2**63:
            raise InvalidArgumentError(f"{name} has values too large for 64-bit integers")
        arr = arr.astype(np.int64)
    return arr


def check_int_array(value, name: str, *, ndim: int | None = None) -> np.ndarray:
    """``value`` as an int64 numpy array; float (even integer-valued), bool and string arrays refused."""
    arr = _as_numpy(value, name)
    if arr.size == 0 and arr.dtype.kind == "f":  # np.asarray([]) is float64: an empty list is fine
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"{name} must hold integers, got an array of dtype {arr.dtype}"
            + (": convert integer-valued floats explicitly with .astype(int)" if arr.dtype.kind == "f" else "")
        )
    if ndim is not None and arr.ndim != ndim:
        raise InvalidArgumentError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def check_real_array(value, name: str, *, ndim: int | None = None, finite: bool = True) -> np.ndarray:
    """``value`` as a float64 numpy array; bool and string arrays refused, and NaN/inf when ``finite``."""
    arr = _as_numpy(value, name)
    if arr.dtype.kind not in "iuf":
        raise ArgumentTypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise InvalidArgumentError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if finite and not np.all(np.isfinite(arr)):
        raise InvalidArgumentError(f"{name} contains NaN or inf")
    return arr


def all_finite(t: torch.Tensor) -> bool:
    """Whether every entry of ``t`` is finite: a finite sum settles it in one read (``isfinite(t).all()`` writes
    a mask first, ten to thirty times slower on a gradient); only a non-finite sum is checked entry by entry."""
    return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())


#: the named dimensions shared across arguments, and what each means in a message
DIMENSIONS = {
    "S": "one value per token of the vocabulary",
    "tokens": "one entry per token occurrence",
    "n": "one entry per sequence",
}


def bind(dims: dict, symbol: str, size: int, name: str) -> None:
    """Bind dimension ``symbol`` to ``size`` for argument ``name``, or check it against an earlier binding."""
    if dims.setdefault(symbol, size) != size:
        raise InvalidArgumentError(
            f"{name} has {symbol} = {size}, but an earlier argument has {symbol} = {dims[symbol]}"
            + (f" ({DIMENSIONS[symbol]})" if symbol in DIMENSIONS else "")
        )


def _check_shape(actual: tuple, shape, name: str, dims: dict, what: str) -> None:
    if len(actual) != len(shape):
        raise InvalidArgumentError(f"{name} must be {len(shape)}-D ({what}), got shape {tuple(actual)}")
    ok = True
    for size, want in zip(actual, shape, strict=True):
        if want.__class__ is str:
            want = dims.setdefault(want, size)
        ok = ok and (want is None or want == size)
    if not ok:
        expected = tuple(size if s is None else dims.get(s, s) for size, s in zip(actual, shape, strict=True))
        named = [DIMENSIONS[s] for s in shape if isinstance(s, str) and s in DIMENSIONS]
        raise InvalidArgumentError(
            f"{name} must be {what} of shape {expected}"
            + (f" ({'; '.join(named)})" if named else "")
            + f"; {name} has shape {tuple(actual)}"
        )


class Constraint:
    """What one argument must be (None passes when ``allow_none``): ``check`` gives its canonical value or
    raises an error naming it; ``what`` says what it must be. ``tests/tokensel/test_declared.py`` knows, for each kind,
    values it refuses and one it accepts."""

    binds: tuple[str, ...] = ()  # the named dimensions it binds
    what = "a value"

    def __init__(self, *, allow_none: bool = False):
        self.allow_none = allow_none

    def describe(self) -> str:
        return self.what

    def check(self, value, name: str, dims: dict):
        raise NotImplementedError

    def validate(self, value, name: str, dims: dict | None = None):
        return None if value is None and self.allow_none else self.check(value, name, {} if dims is None else dims)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.describe()}{' or None' if self.allow_none else ''}>"


class Int(Constraint):
    def __init__(self, min: int | None = None, max: int | None = None, *, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.min, self.max = min, max
        bounds = [f">= {min}"] * (min is not None) + [f"<= {max}"] * (max is not None)
        self.what = "an int" + (" " + " and ".join(bounds) if bounds else "")

    def check(self, value, name, dims):
        return check_int(value, name, min=self.min, max=self.max)


class Real(Constraint):
    def __init__(
        self, min=None, max=None, *, min_inclusive=True, max_inclusive=True, finite=True, allow_none: bool = False
    ):
        super().__init__(allow_none=allow_none)
        self.min, self.max, self.finite = min, max, finite
        self.min_inclusive, self.max_inclusive = min_inclusive, max_inclusive
        bounds = [f"{'>=' if min_inclusive else '>'} {min}"] * (min is not None)
        bounds += [f"{'<=' if max_inclusive else '<'} {max}"] * (max is not None)
        self.what = (
            "a real number " + " and ".join(bounds) if bounds else "a finite real number" * finite or "a real number"
        )

    def check(self, value, name, dims):
        lo, hi = self.min_inclusive, self.max_inclusive
        return check_real(
            value, name, min=self.min, max=self.max, min_inclusive=lo, max_inclusive=hi, finite=self.finite
        )


class Bool(Constraint):
    """A bool (``numpy.bool_`` and 0-d bool tensors accepted); 0, 1 and ``"True"`` refused."""

    what = "True or False"

    def check(self, value, name, dims):
        if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.ndim == 0 and not value.is_meta
        ):
            return bool(value)
        raise ArgumentTypeError(f"{name} must be True or False{' (or None)' if self.allow_none else ''}, {_got(value)}")


class Choice(Constraint):
    """One of ``options``; with ``what`` (``"data set"``) an unknown one is "unknown data set 'x' for name"."""

    def __init__(self, *options, what: str | None = None, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.options, self.noun, self.what = tuple(options), what, f"one of {tuple(options)}"

    def check(self, value, name, dims):
        if self.noun and isinstance(value, str) and value not in self.options:
            raise InvalidArgumentError(f"unknown {self.noun} {_short(value)} for {name}: known are {self.options}")
        return check_choice(value, name, self.options)


class Text(Constraint):
    what = "a non-empty str"

    def check(self, value, name, dims):
        if not isinstance(value, str):
            raise ArgumentTypeError(f"{name} must be a non-empty str, {_got(value)}")
        if not value.strip():
            raise InvalidArgumentError(f"{name} must be a non-empty str, got {value!r}")
        return value


class FilePath(Constraint):
    """A non-blank str or path-like, passed on as a ``pathlib.Path``."""

    what = "a file path (str or pathlib.Path)"

    def check(self, value, name, dims):
        if isinstance(value, (str, os.PathLike)) and str(value).strip():
            return Path(value)
        raise ArgumentTypeError(f"{name} must be {self.what}{' or None' if self.allow_none else ''}, {_got(value)}")


class Instance(Constraint):
    """An instance of one of ``types``, or with ``methods``, any object with those methods (duck typing)."""

    def __init__(self, *types: type, methods: tuple = (), what: str | None = None, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.types, self.methods = types, methods
        self.what = what or "a " + " or ".join(t.__name__ for t in types)

    def check(self, value, name, dims):
        missing = [m for m in self.methods if not callable(getattr(value, m, None))]
        if missing or (self.types and not isinstance(value, self.types)):
            raise ArgumentTypeError(f"{name} must be {self.what}, got {type(value).__name__}")
        return value


def Duck(*methods: str, what: str, allow_none: bool = False) -> Instance:
    return Instance(methods=methods, what=what, allow_none=allow_none)


def Function(what: str = "a function", *, allow_none: bool = False) -> Instance:
    return Duck("__call__", what=what, allow_none=allow_none)


class _Shaped(Constraint):
    """An array or a tensor of ``ndim`` axes or of ``shape`` (ints, named dimensions, None for any size)."""

    def __init__(self, kind, what: str, ndim, shape, finite: bool, allow_none: bool):
        super().__init__(allow_none=allow_none)
        self.kind, self.what, self.finite = kind, what, finite
        self.shape = shape if shape is not None else (None,) * ndim if ndim is not None else None
        self.binds = tuple(s for s in self.shape or () if isinstance(s, str))

    def describe(self) -> str:
        return self.what + ("" if self.shape is None else f" of shape {self.shape}")


class Array(_Shaped):
    """An array (list, numpy array or tensor) of ``kind`` ``"int"``, ``"real"`` or ``"bool"``, passed on as an
    int64, float64 or bool numpy array."""

    def __init__(self, kind="real", *, ndim=None, shape=None, finite=True, nonempty=False, allow_none=False):
        what = {"int": "an array of integers", "real": "an array of real numbers", "bool": "a boolean array"}[kind]
        super().__init__(kind, what, ndim, shape, finite and kind == "real", allow_none)
        self.nonempty = nonempty

    def check(self, value, name, dims):
        if self.kind == "int":
            arr = check_int_array(value, name)
        elif self.kind == "real":
            arr = check_real_array(value, name, finite=self.finite)
        else:
            arr = _as_numpy(value, name)
            if arr.dtype != np.bool_:
                raise ArgumentTypeError(f"{name} must be {self.describe()}, got an array of dtype {arr.dtype}")
        if self.shape is not None:
            _check_shape(arr.shape, self.shape, name, dims, self.what)
        if self.nonempty and 0 in arr.shape:
            raise InvalidArgumentError(f"{name} must have every axis of length >= 1, got shape {arr.shape}")
        return arr


def IntArray(**kw) -> Array:
    return Array("int", **kw)


def RealArray(**kw) -> Array:
    return Array("real", **kw)


class Device(Constraint):
    """A ``torch.device`` this machine can use (no CUDA without a GPU, no meta device)."""

    what = "a device such as 'cpu' or 'cuda'"

    def check(self, value, name, dims):
        if isinstance(value, bool) or not isinstance(value, (str, torch.device, int)):
            raise ArgumentTypeError(f"{name} must be a device such as 'cpu' or 'cuda', {_got(value)}")
        try:
            dev = torch.device(value)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"{name} = {_short(value)} is not a device ({str(exc)[:80]}); use 'cpu'"
            ) from None
        problem = "it holds no values: use 'cpu' or 'cuda'" if dev.type == "meta" else None
        if dev.type == "cuda" and not torch.cuda.is_available():
            problem = f"this torch build or machine has no CUDA GPU (torch {torch.__version__}): use 'cpu'"
        elif dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
            problem = f"there are {torch.cuda.device_count()} GPU(s)"
        elif dev.type == "mps" and not torch.backends.mps.is_available():
            problem = "MPS is not available here: use 'cpu'"
        elif dev.type not in ("cpu", "cuda", "mps", "meta"):
            problem = "it is not supported: use 'cpu' or 'cuda'"
        if problem:
            raise InvalidArgumentError(f"{name} = {str(dev)!r}, but {problem}")
        return dev


_HALF = (torch.float16, torch.bfloat16)


class Dtype(Constraint):
    def __init__(self, *allowed: torch.dtype, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.allowed, self.what = allowed, " or ".join(str(d) for d in allowed)

    def check(self, value, name, dims):
        if isinstance(value, torch.dtype) and value in self.allowed:
            return value
        message = f"{name} must be {self.what}{' (or None)' if self.allow_none else ''}, got {_short(value)}"
        if not isinstance(value, torch.dtype):
            raise ArgumentTypeError(message)
        raise InvalidArgumentError(
            message + (": half precision is not supported for parameters" if value in _HALF else "")
        )


_KINDS = {"float": "a floating-point tensor", "int": "an integer tensor", "bool": "a boolean mask", "real": "numbers"}


class Tensor(_Shaped):
    """A tensor of dtype ``kind`` (``"float"``: float32 or float64, or half with ``half``; ``"int"``, ``"bool"``,
    ``"real"`` or a torch dtype). With ``convert`` a list or array is accepted too, and the value is passed on as a
    copy of its own (int64 for ``"int"``): nothing the caller changes later reaches the result."""

    def __init__(
        self, kind="float", *, ndim=None, shape=None, finite=False, half=False, convert=False, allow_none=False
    ):
        what = _KINDS[kind] if isinstance(kind, str) else f"a {kind} tensor"
        super().__init__(kind, what, ndim, shape, finite, allow_none)
        self.half, self.convert = half, convert

    def _dtype_problem(self, dtype: torch.dtype, name: str) -> str | None:
        kind, floating = self.kind, dtype.is_floating_point
        if not isinstance(kind, str):
            ok, need = dtype == kind, f"of dtype {kind}"
        elif kind == "bool":
            ok, need = dtype == torch.bool, "a boolean mask"
        elif kind == "int":
            ok, need = not floating and dtype != torch.bool, "integers (convert explicitly with .long())"
        else:
            ok, need = (floating, "floating point") if kind == "float" else (dtype != torch.bool, "numbers")
        if not ok or dtype.is_complex:
            return f"{name} must be {need}, got a tensor of dtype {dtype}"
        if kind == "float" and dtype in _HALF and not self.half:
            return f"{name} has dtype {dtype}: use float32 or float64 (half precision is not supported for parameters)"
        return None

    def check(self, value, name, dims):
        if not isinstance(value, torch.Tensor):
            if not self.convert or isinstance(value, (str, bytes)):
                raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__}")
            arr = check_int_array(value, name) if self.kind == "int" else _as_numpy(value, name)
            if self.kind == "bool" and arr.dtype != np.bool_:
                raise ArgumentTypeError(f"{name} must be a boolean mask, got an array of dtype {arr.dtype}")
            if self.kind not in ("int", "bool"):
                if arr.dtype.kind not in "iuf":
                    raise ArgumentTypeError(f"{name} must be numbers, got an array of dtype {arr.dtype}")
                arr = arr.astype(np.float64)
            value = torch.from_numpy(np.array(arr, copy=True, order="C"))
        else:
            problem = self._dtype_problem(_dense(value, name).dtype, name)
            if problem:
                raise ArgumentTypeError(problem)
            if self.convert:
                value = value.detach().to(torch.long if self.kind == "int" else value.dtype, copy=True).contiguous()
        if self.shape is not None:
            _check_shape(value.shape, self.shape, name, dims, self.what)
        if self.finite and value.dtype.is_floating_point and not all_finite(value.detach()):
            raise InvalidArgumentError(f"{name} contains NaN or inf")
        return value


class Either(Constraint):
    """A value one of ``members`` accepts (the first that does gives the canonical value)."""

    def __init__(self, *members: Constraint, what: str, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.members, self.what = members, what

    def check(self, value, name, dims):
        problems = []
        for member in self.members:
            try:
                return member.validate(value, name, dict(dims))
            except TokenselError as exc:
                problems.append(exc)
        kind = ArgumentTypeError if all(isinstance(p, TypeError) for p in problems) else InvalidArgumentError
        raise kind(f"{name} must be {self.what}, {_got(value)}")


class Numbers(Constraint):
    """A non-empty list of numbers (list, tuple, range, 1-D array or tensor), each an int (``kind=int``) or a
    finite real, within the bounds; exactly ``length`` of them when given. Passed on as a list."""

    def __init__(self, kind: type = float, *, min=None, max=None, min_inclusive=True, length=None, allow_none=False):
        super().__init__(allow_none=allow_none)
        self.item = Int(min, max) if kind is int else Real(min, max, min_inclusive=min_inclusive)
        self.length = length
        size = "a non-empty list" if length is None else f"a list of {length}"
        self.what = f"{size} of numbers, each {self.item.what}"

    def check(self, value, name, dims):
        if (
            isinstance(value, (str, bytes, dict, set))
            or not hasattr(value, "__len__")
            or not hasattr(value, "__iter__")
        ):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, {_got(value)}")
        if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim != 1:
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got an array of shape {tuple(value.shape)}")
        if len(value) == 0 or (self.length is not None and len(value) != self.length):
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {len(value)} of them")
        return [self.item.check(v, f"{name}[{i}]", dims) for i, v in enumerate(value)]


class Subset(Constraint):
    """A non-empty tuple or list of distinct ``options``; passed on as a tuple."""

    def __init__(self, *options, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.options = tuple(options)
        self.what = f"a non-empty tuple of distinct names from {self.options}"

    def check(self, value, name, dims):
        if isinstance(value, str) or not isinstance(value, (tuple, list)):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, {_got(value)}")
        if not value or len(set(map(repr, value))) != len(value) or not all(v in self.options for v in value):
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {_short(value)}")
        return tuple(value)


_F = TypeVar("_F", bound=Callable[..., Any])


class Declaration:
    """The declared constraints of one function (``fn.__tokensel_params__``): ``params`` (name -> constraint,
    in checking order), ``signature`` and ``function`` (for a class, its ``__init__``)."""

    def __init__(self, function: Callable, params: dict):
        self.function, self.params = function, dict(params)
        self.signature = inspect.signature(function)
        sig = self.signature.parameters
        for name, constraint in self.params.items():
            if name not in sig or sig[name].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise TypeError(f"declare: {function.__qualname__} has no parameter {name!r} to declare")
            if not isinstance(constraint, Constraint):
                raise TypeError(f"declare: the constraint of {name!r} is not a Constraint: {constraint!r}")
        positional = [n for n, p in sig.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._items = [
            (name, c, positional.index(name) if name in positional else None, sig[name].default)
            for name, c in self.params.items()
        ]

    def validate(self, name: str, value, dims: dict | None = None):
        """The canonical value of ``value`` for parameter ``name``."""
        return self.params[name].validate(value, name, dims)

    def wrap(self, fn: _F) -> _F:
        items = self._items

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            dims: dict = {}
            values = list(args)
            for name, constraint, pos, default in items:  # an argument left at its default is not checked
                if pos is not None and pos < len(values):
                    if values[pos] is not default:
                        values[pos] = constraint.validate(values[pos], name, dims)
                elif name in kwargs and kwargs[name] is not default:
                    kwargs[name] = constraint.validate(kwargs[name], name, dims)
            return fn(*values, **kwargs)

        checked.__tokensel_params__ = self  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]


def declare(**constraints: Constraint):
    """Declare a function's (or a dataclass's) arguments: ``@declare(steps=Int(min=1))``. Each is checked, in
    this order, before the body runs (a dataclass's fields before any is set) and passed on canonical."""

    def decorate(obj):
        if isinstance(obj, type):
            init = obj.__init__  # type: ignore[misc]
            decl = Declaration(init, constraints)
            obj.__init__ = decl.wrap(init)  # type: ignore[misc]
            obj.__tokensel_params__ = decl  # type: ignore[attr-defined]
            return obj
        return Declaration(obj, constraints).wrap(obj)

    return decorate


def unchecked(fn: _F) -> _F:
    """``fn`` without its declared checks, for a loop that calls it many times on arguments it has checked."""
    return getattr(fn, "__wrapped__", fn)


def check_fields(obj) -> None:
    """Check the current fields of a declared dataclass's instance (a tensor written into in place, say)."""
    decl: Declaration = type(obj).__tokensel_params__
    dims: dict = {}
    for name in decl.params:
        decl.validate(name, getattr(obj, name), dims)
