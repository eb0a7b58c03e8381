"""Argument checks: constraints declared next to each public function and checked before its body runs (in
the manner of scikit-learn's ``validate_params``), and the ``check_*`` functions that do the checking.

**Declaring.** ::

    @declare(error=InvalidParameterError, vocab_size=Int(min=1), d=Int(min=1), dtype=Dtype(torch.float64))
    def init(vocab_size, d, dtype=torch.float64): ...

:func:`declare` binds each call's arguments to the function's signature, checks every declared argument in
the order of the declaration and hands the body its canonical value: a Python int for an int, a float for a
real number, a ``pathlib.Path`` for a path, an int64 or float64 array for an array. That is
canonicalisation, never coercion: a float where an int is needed (even ``2.0``), a string where a list is
needed or a boolean where a number is needed is refused, not truncated or iterated. The body runs only once
every declared argument has passed. An argument left at its default is not checked (the default is the
function's own; ``tests/test_declared.py`` checks every default against its constraint). ``declare`` on a
class (a dataclass) declares its fields, checked by the class's ``__init__`` before any field is set.

The declaration is recorded on the function (``fn.__tokensel_params__``, a :class:`Declaration`), and the
bad-input tests are generated from it: each constraint names values it refuses (:meth:`Constraint.invalid`)
and a value it accepts (:meth:`Constraint.example`), so a function declared tomorrow is fuzzed without new
test code.

**The error class: one rule.** A declaration names its error class (``error=``, default
:class:`~tokensel.errors.InvalidArgumentError`); every problem with a declared argument raises that class,
a problem of type (a str where an int is needed) its type variant (:func:`type_error`: a subclass of that
class and of :class:`~tokensel.errors.ArgumentTypeError`, so both ``except error`` and ``except TypeError``
catch it). The message names the argument and says what it needs.

**Across arguments.** A constraint checks one argument, with one exception: named dimensions. A shape may
name a dimension (``Tensor(shape=("S",))``: one value per token); the first argument that has it binds its
size (a batch binds ``S``, ``tokens`` and ``n``, see :data:`DIMENSIONS`), and a later argument is checked
against it. Every other relation between arguments (a batch against a model's vocabulary, a selection
inside a mask, ``lo <= hi``) is checked in the body, after the declared checks and before anything changes.

The ``check_*`` functions return the value in its canonical type or raise an :mod:`tokensel.errors`
exception whose message names the argument, says what it got and what it needs; the constraints call them.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .errors import (
    ArgumentTypeError,
    BatchTypeError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidBatchError,
    InvalidParameterError,
    ParameterTypeError,
    TokenselError,
)

if TYPE_CHECKING:
    import torch
else:

    class _Torch:
        """torch for this module, imported where first needed: the book's tooling (its Sphinx extensions, the
        ``verify`` command) checks arguments without ever meeting a tensor, and importing torch costs seconds. A
        value cannot be a tensor before torch is imported, so ``isinstance(value, torch.Tensor)`` imports
        nothing."""

        class _NoTensor:  # what ``torch.Tensor`` is for an isinstance check while torch is not imported
            pass

        def __getattr__(self, name: str):
            if name == "Tensor" and "torch" not in sys.modules:
                return self._NoTensor
            import torch as module

            return getattr(module, name)

    torch = _Torch()

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
    "declare",
    "check_fields",
    "unchecked",
    "bind",
    "type_error",
    "Declaration",
    "Constraint",
    "Int",
    "Real",
    "Bool",
    "Choice",
    "Text",
    "FilePath",
    "Instance",
    "Duck",
    "Function",
    "IntArray",
    "RealArray",
    "BoolArray",
    "Device",
    "Dtype",
    "Tensor",
    "Either",
    "Pair",
    "Numbers",
    "Subset",
    "DIMENSIONS",
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


def all_finite(t: torch.Tensor) -> bool:
    """Whether every entry of the float tensor ``t`` is finite. Its sum is NaN or inf where an entry is, so a finite
    sum settles it in one read; only a sum that is not finite (a NaN or inf, or finite entries whose sum overflows)
    has the entries checked one by one. ``torch.isfinite(t).all()`` writes a mask of ``t``'s size first: on a
    7,903 x 64 gradient it takes ten to thirty times as long as the sum."""
    return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())


# --------------------------------------------------------------------------- declared constraints

#: the named dimensions shared across arguments, and what each means in a message
DIMENSIONS = {
    "S": "one value per token of the vocabulary",
    "tokens": "one entry per token occurrence",
    "n": "one entry per sequence",
}
_SIZE = 2  # the size an example gives a dimension no earlier argument has bound
_TYPE_VARIANTS: dict[type, type] = {
    InvalidArgumentError: InvalidArgumentTypeError,
    InvalidBatchError: BatchTypeError,
    InvalidParameterError: ParameterTypeError,
}


def type_error(error: type) -> type:
    """The class a declaration whose errors are ``error`` raises for an argument of the wrong type: ``error``
    itself when it is a ``TypeError``, else a subclass of both ``error`` and
    :class:`~tokensel.errors.ArgumentTypeError` (:class:`~tokensel.errors.InvalidArgumentTypeError`,
    :class:`~tokensel.errors.BatchTypeError`, :class:`~tokensel.errors.ParameterTypeError`, ...): so
    ``except error`` catches every problem with a declared argument, and ``except TypeError`` a wrong type."""
    if issubclass(error, TypeError):
        return error
    if not issubclass(error, TokenselError):
        raise TypeError(f"declare: error must be a tokensel error class, got {error!r}")
    if error not in _TYPE_VARIANTS:
        doc = f"An argument of a function whose errors are {error.__name__} has the wrong type."
        _TYPE_VARIANTS[error] = type(
            error.__name__ + "Type", (error, ArgumentTypeError), {"__doc__": doc, "__module__": error.__module__}
        )
    return _TYPE_VARIANTS[error]


def _as_declared(exc: TokenselError, error: type) -> TokenselError:
    kind = type_error(error) if isinstance(exc, TypeError) else error
    return exc if isinstance(exc, kind) else kind(str(exc))


def bind(dims: dict, symbol: str, size: int, name: str) -> None:
    """Bind the named dimension ``symbol`` to ``size`` for argument ``name``, or check it against the size an
    earlier argument bound."""
    if dims.setdefault(symbol, size) != size:
        raise InvalidArgumentError(
            f"{name} has {symbol} = {size}, but an earlier argument has {symbol} = {dims[symbol]}"
            + (f" ({DIMENSIONS[symbol]})" if symbol in DIMENSIONS else "")
        )


def _resolve(shape, dims: dict) -> tuple:
    """A concrete shape for an example: named dimensions bound in ``dims`` take their size, others ``_SIZE``."""
    return tuple(dims.get(s, _SIZE) if isinstance(s, str) else (_SIZE if s is None else s) for s in shape)


def _check_shape(actual: tuple, shape, name: str, dims: dict, what: str) -> None:
    """``actual`` against a declared ``shape`` (ints, named dimensions, None for any size); binds the named
    dimensions no earlier argument has bound."""
    if len(actual) != len(shape):
        raise InvalidArgumentError(f"{name} must be {len(shape)}-D ({what}), got shape {tuple(actual)}")
    ok = True
    for size, want in zip(actual, shape, strict=True):
        if want.__class__ is str:
            want = dims.setdefault(want, size)
        ok = ok and (want is None or want == size)
    if not ok:
        actual = tuple(actual)
        expected = [size if s is None else dims.get(s, s) for size, s in zip(actual, shape, strict=True)]
        named = [DIMENSIONS[s] for s in shape if isinstance(s, str) and s in DIMENSIONS]
        raise InvalidArgumentError(
            f"{name} must be {what} of shape {tuple(expected)}"
            + (f" ({'; '.join(named)})" if named else "")
            + f"; {name} has shape {actual}"
        )


def _wrong_shapes(shape, dims: dict) -> list[tuple]:
    """Shapes that a declared ``shape`` refuses whatever the dimensions bound later: one more axis, and one
    entry too many along each axis of fixed or already bound size."""
    good = _resolve(shape, dims)
    out = [good + (1,)]
    for i, s in enumerate(shape):
        if isinstance(s, int) or (isinstance(s, str) and s in dims):
            out.append(good[:i] + (good[i] + 1,) + good[i + 1 :])
    return out


class Constraint:
    """What one argument must be. ``allow_none``: None is accepted (and passed on as None).

    A subclass defines :meth:`check` (the value in its canonical type, or a tokensel error: a type problem as
    an ``ArgumentTypeError``, any other as an ``InvalidArgumentError``), :meth:`describe`, and for the
    generated tests ``_invalid`` (values it refuses, listed by :meth:`invalid`) and :meth:`example` (a value it
    accepts)."""

    #: the named dimensions this constraint binds when no earlier argument has
    binds: tuple[str, ...] = ()

    def __init__(self, *, allow_none: bool = False):
        self.allow_none = allow_none

    def describe(self) -> str:
        """What the argument must be, as in "steps must be <this>"."""
        raise NotImplementedError

    def check(self, value, name: str, dims: dict):
        """``value`` in its canonical type, or a tokensel error naming ``name``."""
        raise NotImplementedError

    def validate(self, value, name: str, error: type = InvalidArgumentError, dims: dict | None = None):
        """:meth:`check` with the errors of the declaration: ``error``, or its :func:`type_error` variant."""
        if value is None and self.allow_none:
            return None
        try:
            return self.check(value, name, {} if dims is None else dims)
        except TokenselError as exc:
            raise _as_declared(exc, error) from None

    def invalid(self, dims: dict) -> list[tuple[str, Any]]:
        """``(label, value)`` pairs this constraint refuses, given the dimensions bound by earlier arguments."""
        out: list[tuple[str, Any]] = [("an object", object())]
        return out + ([] if self.allow_none else [("None", None)]) + self._invalid(dims)

    def _invalid(self, dims: dict) -> list[tuple[str, Any]]:
        return []

    def example(self, dims: dict):
        """A value this constraint accepts (NotImplemented when the tests' registry of types must give one)."""
        return NotImplemented

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.describe()}{' or None' if self.allow_none else ''}>"


class Int(Constraint):
    """A Python int (numpy ints and 0-d integer tensors accepted) in ``[min, max]``; bools, floats (even
    ``2.0``) and strings refused (:func:`check_int`)."""

    def __init__(self, min: int | None = None, max: int | None = None, *, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.min, self.max = min, max

    def describe(self) -> str:
        bounds = [f">= {self.min}"] * (self.min is not None) + [f"<= {self.max}"] * (self.max is not None)
        return "an int" + (" " + " and ".join(bounds) if bounds else "")

    def check(self, value, name, dims):
        return check_int(value, name, min=self.min, max=self.max)

    def _invalid(self, dims):
        out = [
            ("a float", 1.5),
            ("an integral float", float(self.example(dims))),
            ("a bool", True),
            ("a str", "1"),
            ("NaN", math.nan),
            ("a list", [1]),
            ("2**64", 2**64),
            ("a float tensor", torch.tensor(1.0)),
            ("a meta tensor", torch.tensor(1, device="meta")),
        ]
        out += [("below the minimum", self.min - 1)] if self.min is not None else []
        return out + ([("above the maximum", self.max + 1)] if self.max is not None else [])

    def example(self, dims):
        if self.min is not None:
            return self.min
        return 1 if self.max is None or self.max >= 1 else self.max


class Real(Constraint):
    """A Python float (ints, numpy numbers and 0-d tensors accepted) within the bounds; bools, strings and
    NaN refused, and inf unless ``finite=False`` (:func:`check_real`)."""

    def __init__(
        self,
        min: float | None = None,
        max: float | None = None,
        *,
        min_inclusive: bool = True,
        max_inclusive: bool = True,
        finite: bool = True,
        allow_none: bool = False,
    ):
        super().__init__(allow_none=allow_none)
        self.min, self.max, self.finite = min, max, finite
        self.min_inclusive, self.max_inclusive = min_inclusive, max_inclusive

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            lo, hi = "[" if self.min_inclusive else "(", "]" if self.max_inclusive else ")"
            return f"a real number in {lo}{self.min}, {self.max}{hi}"
        if self.min is not None:
            return f"a real number {'>=' if self.min_inclusive else '>'} {self.min}"
        if self.max is not None:
            return f"a real number {'<=' if self.max_inclusive else '<'} {self.max}"
        return "a finite real number" if self.finite else "a real number"

    def check(self, value, name, dims):
        return check_real(
            value,
            name,
            min=self.min,
            max=self.max,
            min_inclusive=self.min_inclusive,
            max_inclusive=self.max_inclusive,
            finite=self.finite,
        )

    def _invalid(self, dims):
        out = [
            ("a str", "0.5"),
            ("a bool", True),
            ("NaN", math.nan),
            ("a complex", 1j),
            ("a list", [0.5]),
            ("10**400", 10**400),
            ("a 1-d tensor", torch.tensor([0.5, 0.5])),
            ("a meta tensor", torch.tensor(0.5, device="meta")),
        ]
        out += [("inf", math.inf), ("-inf", -math.inf)] if self.finite else []
        if self.min is not None:
            out += [("below the minimum", self.min - 1.0)] + [("the open minimum", self.min)] * (not self.min_inclusive)
        if self.max is not None:
            out += [("above the maximum", self.max + 1.0)] + [("the open maximum", self.max)] * (not self.max_inclusive)
        return out

    def example(self, dims):
        if self.min is not None and self.max is not None:
            return (self.min + self.max) / 2
        if self.min is not None:
            return self.min + 1.0
        return 0.5 if self.max is None else self.max - 1.0


class Bool(Constraint):
    """True or False (``numpy.bool_`` accepted); ints, strings and other truthy values refused (:func:`check_bool`)."""

    def describe(self) -> str:
        return "True or False"

    def check(self, value, name, dims):
        return check_bool(value, name, allow_none=self.allow_none)

    def _invalid(self, dims):
        return [("an int", 1), ("zero", 0), ("a str", "True"), ("a float", 1.0), ("an array", np.array([True, False]))]

    def example(self, dims):
        return True


class Choice(Constraint):
    """One of ``options`` (strings compared by exact spelling; :func:`check_choice`). With ``what`` (e.g.
    ``"data set"``) an unknown string is reported as "unknown data set 'x' for name"."""

    def __init__(self, *options, what: str | None = None, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.options, self.what = tuple(options), what

    def describe(self) -> str:
        return f"one of {self.options}"

    def check(self, value, name, dims):
        if self.what and isinstance(value, str) and value not in self.options:
            raise InvalidArgumentError(f"unknown {self.what} {_short(value)} for {name}: known are {self.options}")
        return check_choice(value, name, self.options)

    def _invalid(self, dims):
        out = [("an unknown option", "no-such-option"), ("an int", 1), ("bytes", b"x")]
        first = self.options[0]
        if isinstance(first, str) and first.upper() not in self.options:
            out.append(("another spelling", first.upper()))
        return out

    def example(self, dims):
        return self.options[0]


class Text(Constraint):
    """A non-empty str (a name, a column, a recipe)."""

    def describe(self) -> str:
        return "a non-empty str"

    def check(self, value, name, dims):
        if not isinstance(value, str):
            raise ArgumentTypeError(f"{name} must be a non-empty str, got {type(value).__name__} {_short(value)}")
        if not value.strip():
            raise InvalidArgumentError(f"{name} must be a non-empty str, got {value!r}")
        return value

    def _invalid(self, dims):
        return [("an empty str", ""), ("blanks", "  "), ("an int", 1), ("bytes", b"x"), ("a list", ["x"])]

    def example(self, dims):
        return "example"


class FilePath(Constraint):
    """A file or folder path: a str or path-like, passed on as a ``pathlib.Path`` (:func:`check_path`)."""

    def describe(self) -> str:
        return "a file path (str or pathlib.Path)"

    def check(self, value, name, dims):
        return check_path(value, name, allow_none=False)

    def _invalid(self, dims):
        return [("an int", 1), ("an empty str", ""), ("blanks", "  "), ("bytes", b"x"), ("a list", ["x"])]

    def example(self, dims):
        return Path("tokensel-example")


class Instance(Constraint):
    """An instance of one of ``types``; ``what`` says it in words (default: the types' names)."""

    def __init__(self, *types: type, what: str | None = None, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.types = types
        self.what = what or "a " + " or ".join(t.__name__ for t in types)

    def describe(self) -> str:
        return self.what

    def check(self, value, name, dims):
        if not isinstance(value, self.types):
            raise ArgumentTypeError(f"{name} must be {self.what}, got {type(value).__name__}")
        return value

    def _invalid(self, dims):
        return [(label, v) for label, v in (("a str", "x"), ("an int", 1)) if not isinstance(v, self.types)]


class Duck(Constraint):
    """An object with the ``methods`` named (a model for the training loop, a table for a reader)."""

    def __init__(self, *methods: str, what: str, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.methods, self.what = methods, what

    def describe(self) -> str:
        return self.what

    def check(self, value, name, dims):
        missing = [m for m in self.methods if not callable(getattr(value, m, None))]
        if missing:
            raise ArgumentTypeError(f"{name} must be {self.what}, got {type(value).__name__} (no {', '.join(missing)})")
        return value

    def _invalid(self, dims):
        return [("a str", "x"), ("an int", 1)]


class Function(Constraint):
    """A callable."""

    def __init__(self, what: str = "a function", *, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.what = what

    def describe(self) -> str:
        return self.what

    def check(self, value, name, dims):
        if not callable(value):
            raise ArgumentTypeError(f"{name} must be {self.what}, got {type(value).__name__} {_short(value)}")
        return value

    def _invalid(self, dims):
        return [("an int", 1), ("a str", "f")]

    def example(self, dims):
        return lambda *args, **kwargs: {}


class _Array(Constraint):
    """What the numpy-array constraints share: a declared ``ndim`` or ``shape`` (named dimensions allowed)."""

    what = "an array"

    def __init__(
        self, *, ndim: int | None = None, shape: tuple | None = None, nonempty: bool = False, allow_none: bool = False
    ):
        super().__init__(allow_none=allow_none)
        self.shape = shape if shape is not None else (None,) * ndim if ndim is not None else None
        self.binds = tuple(s for s in self.shape or () if isinstance(s, str))
        self.nonempty = nonempty

    def describe(self) -> str:
        return self.what + ("" if self.shape is None else f" of shape {self.shape}")

    def _shaped(self, arr: np.ndarray, name: str, dims: dict) -> np.ndarray:
        if self.shape is not None:
            _check_shape(arr.shape, self.shape, name, dims, self.what)
        if self.nonempty and 0 in arr.shape:
            raise InvalidArgumentError(f"{name} must have every axis of length >= 1, got shape {arr.shape}")
        return arr

    def _good_shape(self, dims) -> tuple:
        return _resolve(self.shape if self.shape is not None else (None,), dims)

    def _invalid(self, dims):
        shape = self._good_shape(dims)
        out = [
            ("a str", "abc"),
            ("an array of str", np.full(shape, "a")),
            ("a ragged list", [[1, 2], [3]]),
            ("a complex tensor", torch.zeros(shape, dtype=torch.complex64)),
            ("a meta tensor", torch.zeros(shape, device="meta")),
        ]
        if self.shape is not None:
            out += [(f"shape {s}", self._make(s)) for s in _wrong_shapes(self.shape, dims)]
        if self.nonempty:
            out.append(("an empty axis", self._make((0,) + shape[1:])))
        return out

    def _make(self, shape: tuple):
        raise NotImplementedError

    def example(self, dims):
        return self._make(self._good_shape(dims))


class IntArray(_Array):
    """An array of integers (list, numpy array or tensor), passed on as an int64 numpy array
    (:func:`check_int_array`); floats (even integer-valued), bools and strings refused."""

    what = "an array of integers"

    def check(self, value, name, dims):
        return self._shaped(check_int_array(value, name), name, dims)

    def _invalid(self, dims):
        shape = self._good_shape(dims)
        return super()._invalid(dims) + [
            ("an array of floats", np.full(shape, 0.5)),
            ("an array of bools", np.ones(shape, dtype=bool)),
            ("uint64 above 2**63", np.full(shape, 2**64 - 1, dtype=np.uint64)),
        ]

    def _make(self, shape):
        return np.zeros(shape, dtype=np.int64)


class RealArray(_Array):
    """An array of real numbers (list, numpy array or tensor), passed on as a float64 numpy array
    (:func:`check_real_array`); bools and strings refused, and NaN/inf when ``finite``."""

    what = "an array of real numbers"

    def __init__(self, *, ndim=None, shape=None, finite: bool = True, nonempty: bool = False, allow_none: bool = False):
        super().__init__(ndim=ndim, shape=shape, nonempty=nonempty, allow_none=allow_none)
        self.finite = finite

    def check(self, value, name, dims):
        return self._shaped(check_real_array(value, name, finite=self.finite), name, dims)

    def _invalid(self, dims):
        shape = self._good_shape(dims)
        out = super()._invalid(dims) + [("an array of bools", np.ones(shape, dtype=bool))]
        return out + ([("NaN", np.full(shape, np.nan)), ("inf", np.full(shape, np.inf))] if self.finite else [])

    def _make(self, shape):
        return np.zeros(shape)


class BoolArray(_Array):
    """A boolean array (numpy or tensor), passed on as a numpy bool array; numbers refused."""

    what = "a boolean array"

    def check(self, value, name, dims):
        if isinstance(value, (str, bytes)) or not isinstance(value, (np.ndarray, torch.Tensor, list, tuple)):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__}")
        arr = _as_numpy(value, name)
        if arr.dtype != np.bool_:
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got an array of dtype {arr.dtype}")
        return self._shaped(arr, name, dims)

    def _invalid(self, dims):
        shape = self._good_shape(dims)
        return super()._invalid(dims) + [("an array of ints", np.ones(shape, dtype=np.int64))]

    def _make(self, shape):
        return np.ones(shape, dtype=bool)


class Device(Constraint):
    """A torch device this build of torch can use (:func:`check_device`)."""

    def describe(self) -> str:
        return "a device such as 'cpu' or 'cuda'"

    def check(self, value, name, dims):
        return check_device(value, name)

    def _invalid(self, dims):
        return [
            ("an unknown device", "gpu"),
            ("a float", 1.5),
            ("a bool", True),
            ("meta", "meta"),
            ("GPU 99", "cuda:99"),
        ]

    def example(self, dims):
        return "cpu"


def _half() -> tuple:
    """The half-precision dtypes (a function: torch is imported where first needed)."""
    return (torch.float16, torch.bfloat16)


class Dtype(Constraint):
    """One of the torch dtypes ``allowed``."""

    def __init__(self, *allowed: torch.dtype, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.allowed = allowed

    def describe(self) -> str:
        return " or ".join(str(d) for d in self.allowed)

    def check(self, value, name, dims):
        if value in self.allowed and isinstance(value, torch.dtype):
            return value
        half = isinstance(value, torch.dtype) and value in _half()
        message = f"{name} must be {self.describe()}{' (or None)' if self.allow_none else ''}, got {_short(value)}" + (
            ": half precision is not supported for parameters" if half else ""
        )
        raise (InvalidArgumentError if isinstance(value, torch.dtype) else ArgumentTypeError)(message)

    def _invalid(self, dims):
        out = [("a str", str(self.allowed[0]).replace("torch.", "")), ("a numpy dtype", np.float32), ("an int", 1)]
        other = [d for d in (torch.float16, torch.int64, torch.complex64, torch.float64) if d not in self.allowed]
        return out + [(str(d), d) for d in other[:3]]

    def example(self, dims):
        return self.allowed[0]


_KINDS = {"float": "a floating-point tensor", "int": "an integer tensor", "bool": "a boolean mask", "real": "numbers"}


class Tensor(Constraint):
    """A torch tensor of one kind of dtype: ``"float"`` (float32 or float64; half precision refused unless
    ``half``), ``"int"``, ``"bool"``, ``"real"`` (int or float) or one torch dtype; of ``ndim`` axes or of
    ``shape`` (named dimensions allowed); finite when ``finite``. Tensors on the meta device, sparse and
    complex ones are refused. With ``convert`` a list or numpy array is accepted too and passed on as a tensor
    of its own (int64 for ``"int"``, float64 for ``"float"`` and ``"real"``), and a tensor is passed on as a
    detached copy (int64 for ``"int"``), so that nothing the caller changes later reaches the result."""

    def __init__(
        self,
        kind: str | torch.dtype = "float",
        *,
        ndim: int | None = None,
        shape: tuple | None = None,
        finite: bool = False,
        half: bool = False,
        convert: bool = False,
        allow_none: bool = False,
    ):
        super().__init__(allow_none=allow_none)
        self.kind, self.finite, self.half, self.convert = kind, finite, half, convert
        self.shape = shape if shape is not None else (None,) * ndim if ndim is not None else None
        self.binds = tuple(s for s in self.shape or () if isinstance(s, str))
        self._accepted: set = set()

    @property
    def what(self) -> str:
        return _KINDS[self.kind] if isinstance(self.kind, str) else f"a {self.kind} tensor"

    def describe(self) -> str:
        return self.what + ("" if self.shape is None else f" of shape {self.shape}")

    def _dtype_problem(self, dtype: torch.dtype, name: str) -> str | None:
        if dtype.is_complex:
            return f"{name} must hold real numbers, got a {dtype} tensor"
        kind = self.kind
        if not isinstance(kind, str):
            return None if dtype == kind else f"{name} must have dtype {kind}, got {dtype}"
        if kind == "bool":
            return None if dtype == torch.bool else f"{name} must be a boolean mask, got dtype {dtype}"
        if kind == "int":
            if dtype.is_floating_point or dtype == torch.bool:
                return f"{name} must be integers, got a tensor of dtype {dtype}" + (
                    ": convert explicitly with .long()" if dtype.is_floating_point else ""
                )
            return None
        if dtype == torch.bool:
            return f"{name} must be {'floating point' if kind == 'float' else 'numbers'}, got dtype {dtype}"
        if kind == "float" and not dtype.is_floating_point:
            return f"{name} must be floating point, got {dtype}"
        if kind == "float" and dtype in _half() and not self.half:
            return f"{name} has dtype {dtype}: use float32 or float64 (half precision is not supported for parameters)"
        return None

    def check(self, value, name, dims):
        if not isinstance(value, torch.Tensor):
            if not self.convert or isinstance(value, (str, bytes)):
                raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__}")
            if self.kind == "int":
                arr = check_int_array(value, name)
            elif self.kind == "bool":
                arr = _as_numpy(value, name)
                if arr.dtype != np.bool_:
                    raise ArgumentTypeError(f"{name} must be a boolean mask, got an array of dtype {arr.dtype}")
            else:
                arr = _as_numpy(value, name)
                if arr.dtype.kind not in "iuf":
                    raise ArgumentTypeError(f"{name} must be numbers, got an array of dtype {arr.dtype}")
                arr = arr.astype(np.float64)
            value = torch.from_numpy(np.array(arr, copy=True, order="C"))
        else:
            if value.is_meta:
                raise ArgumentTypeError(f"{name} is a tensor on the meta device: it has no values")
            if value.layout is not torch.strided:
                raise ArgumentTypeError(f"{name} is a {value.layout} tensor: pass a dense one (.to_dense())")
            dtype = value.dtype
            if dtype not in self._accepted:  # the dtypes seen to pass are remembered: one lookup per call
                problem = self._dtype_problem(dtype, name)
                if problem:
                    raise ArgumentTypeError(problem)
                self._accepted.add(dtype)
            if self.convert:
                value = value.detach().to(torch.long if self.kind == "int" else dtype, copy=True).contiguous()
        if self.shape is not None:
            _check_shape(value.shape, self.shape, name, dims, self.what)
        if self.finite and value.numel() and value.dtype.is_floating_point:
            lo, hi = torch.aminmax(value.detach())  # one read of the tensor; NaN propagates through both
            if not (bool(torch.isfinite(lo)) and bool(torch.isfinite(hi))):
                raise InvalidArgumentError(f"{name} contains NaN or inf")
        return value

    def _dtype(self) -> torch.dtype:
        if isinstance(self.kind, torch.dtype):
            return self.kind
        return {"float": torch.float64, "int": torch.long, "bool": torch.bool, "real": torch.float64}[self.kind]

    def _invalid(self, dims):
        shape = _resolve(self.shape if self.shape is not None else (None,), dims)
        dtype = self._dtype()
        out = [
            ("a str", "abc"),
            ("a complex tensor", torch.zeros(shape, dtype=torch.complex64)),
            ("a meta tensor", torch.zeros(shape, dtype=dtype, device="meta")),
            ("a sparse tensor", torch.zeros(shape, dtype=dtype).to_sparse()),
        ]
        if not self.convert:
            out.append(("a list", torch.zeros(shape, dtype=dtype).tolist()))
        for other in (torch.float64, torch.long, torch.bool, torch.float16):
            if self._dtype_problem(other, "x") is not None:
                out.append((f"a {other} tensor", torch.zeros(shape, dtype=other)))
        if self.shape is not None:
            out += [(f"shape {s}", torch.zeros(s, dtype=dtype)) for s in _wrong_shapes(self.shape, dims)]
        if self.finite and dtype.is_floating_point:
            out += [
                ("NaN", torch.full(shape, math.nan, dtype=dtype)),
                ("inf", torch.full(shape, math.inf, dtype=dtype)),
            ]
        return out

    def example(self, dims):
        return torch.zeros(_resolve(self.shape if self.shape is not None else (None,), dims), dtype=self._dtype())


class Either(Constraint):
    """A value one of ``members`` accepts (the first that does gives the canonical value); ``what`` says what
    they accept in words (default: their descriptions joined by "or")."""

    def __init__(self, *members: Constraint, what: str | None = None, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.members = members
        self.what = what or " or ".join(m.describe() for m in members)

    def describe(self) -> str:
        return self.what

    def check(self, value, name, dims):
        problems = []
        for member in self.members:
            if value is None and member.allow_none:
                return None
            try:
                return member.check(value, name, dict(dims))
            except TokenselError as exc:
                problems.append(exc)
        kind = ArgumentTypeError if all(isinstance(p, TypeError) for p in problems) else InvalidArgumentError
        raise kind(f"{name} must be {self.describe()}, got {type(value).__name__} {_short(value)}")

    def _invalid(self, dims):
        out = []
        for member in self.members:
            for label, value in member._invalid(dims):
                try:
                    self.check(value, "x", dict(dims))
                except TokenselError:
                    out.append((label, value))
        return out

    def example(self, dims):
        return self.members[0].example(dims)


class Pair(Constraint):
    """Two values ``(a, b)`` (a tuple or a list), each accepted by ``item``; passed on as a tuple."""

    def __init__(self, item: Constraint, *, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.item = item

    def describe(self) -> str:
        return f"a pair (lo, hi) of {self.item.describe()}"

    def check(self, value, name, dims):
        if not isinstance(value, (tuple, list)):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__} {_short(value)}")
        if len(value) != 2:
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {_short(value)}")
        return tuple(self.item.check(v, f"{name}[{i}]", dims) for i, v in enumerate(value))

    def _invalid(self, dims):
        good = self.item.example(dims)
        bad = [(f"a pair holding {label}", (v, good)) for label, v in self.item._invalid(dims)[:3]]
        return [("a str", "ab"), ("one value", (good,)), ("three values", (good, good, good))] + bad

    def example(self, dims):
        good = self.item.example(dims)
        return (good, good)


class Numbers(Constraint):
    """A non-empty list of numbers (a list, tuple, range, 1-D array or 1-D tensor), each an int (``kind=int``:
    floats refused, even ``2.0``) or a real number (``kind=float``: NaN and inf refused) within the bounds;
    with ``length``, exactly that many; with ``distinct``, no two equal. Passed on as a list of Python ints or
    floats (grid axes, seeds, step sizes)."""

    def __init__(
        self,
        kind: type = float,
        *,
        min: float | None = None,
        max: float | None = None,
        min_inclusive: bool = True,
        length: int | None = None,
        distinct: bool = False,
        allow_none: bool = False,
    ):
        super().__init__(allow_none=allow_none)
        if kind is int:
            self.item: Constraint = Int(min=None if min is None else int(min), max=None if max is None else int(max))
        else:
            self.item = Real(min=min, max=max, min_inclusive=min_inclusive)
        self.length, self.distinct = length, distinct

    def describe(self) -> str:
        size = "a non-empty list" if self.length is None else f"a list of {self.length}"
        return f"{size}{' distinct' if self.distinct else ''} of numbers, each {self.item.describe()}"

    def check(self, value, name, dims):
        if (
            isinstance(value, (str, bytes, dict, set, frozenset))
            or not hasattr(value, "__len__")
            or not hasattr(value, "__iter__")
        ):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__} {_short(value)}")
        if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim != 1:
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got an array of shape {tuple(value.shape)}")
        if len(value) == 0 or (self.length is not None and len(value) != self.length):
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {len(value)} of them")
        out = [self.item.check(v, f"{name}[{i}]", dims) for i, v in enumerate(value)]
        if self.distinct and len(set(out)) != len(out):
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {_short(value)}")
        return out

    def _invalid(self, dims):
        good = self.item.example(dims)
        out = [("empty", []), ("a str", "1"), ("a bare number", good), ("a 2-D array", np.full((1, 1), good))]
        out += [(f"a list holding {label}", [v]) for label, v in self.item._invalid(dims)]
        if self.length is not None:
            out.append(("one too many", [good] * (self.length + 1)))
        return out + ([("twice the same", [good, good])] if self.distinct else [])

    def example(self, dims):
        good = self.item.example(dims)
        return [good + i for i in range(self.length or 1)]


class Subset(Constraint):
    """A non-empty tuple or list of distinct ``options``; passed on as a tuple."""

    def __init__(self, *options, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.options = tuple(options)

    def describe(self) -> str:
        return f"a non-empty tuple of distinct names from {self.options}"

    def check(self, value, name, dims):
        if isinstance(value, str) or not isinstance(value, (tuple, list)):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__} {_short(value)}")
        if not value or len(set(map(repr, value))) != len(value) or not all(v in self.options for v in value):
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {_short(value)}")
        return tuple(value)

    def _invalid(self, dims):
        first = self.options[0]
        return [("a bare option", first), ("empty", ()), ("twice", (first, first)), ("unknown", (first, "?"))]

    def example(self, dims):
        return (self.options[0],)


# --------------------------------------------------------------------------- the declaration

_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C", bound=type)


class Declaration:
    """The declared constraints of one function (``fn.__tokensel_params__``): ``params`` (name -> constraint,
    in the order they are checked), ``error`` (the class every problem raises, :func:`type_error` for a type),
    ``signature`` and ``function`` (the function as written; for a class, its ``__init__``)."""

    def __init__(self, function: Callable, params: dict, error: type):
        self.function, self.params, self.error = function, dict(params), error
        type_error(error)  # a tokensel error class, or the declaration fails at import
        self.signature = inspect.signature(function)
        sig = self.signature.parameters
        for name, constraint in self.params.items():
            if name not in sig or sig[name].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise TypeError(f"declare: {function.__qualname__} has no parameter {name!r} to declare")
            if not isinstance(constraint, Constraint):
                raise TypeError(f"declare: the constraint of {name!r} is not a Constraint: {constraint!r}")
        positional = [
            n
            for n, p in sig.items()
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        self._items = [
            (name, c, positional.index(name) if name in positional else None, sig[name].default)
            for name, c in self.params.items()
        ]

    def validate(self, name: str, value, dims: dict | None = None):
        """The canonical value of ``value`` for parameter ``name``, or the declaration's error."""
        return self.params[name].validate(value, name, self.error, dims)

    def wrap(self, fn: _F) -> _F:
        """``fn`` with its declared arguments checked, and replaced by their canonical values, before it runs."""
        items, error = self._items, self.error

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            dims: dict = {}
            values = list(args)
            for name, constraint, pos, default in items:
                if pos is not None and pos < len(values):
                    if values[pos] is not default:
                        values[pos] = constraint.validate(values[pos], name, error, dims)
                elif name in kwargs and kwargs[name] is not default:
                    kwargs[name] = constraint.validate(kwargs[name], name, error, dims)
            return fn(*values, **kwargs)

        checked.__tokensel_params__ = self  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]


def declare(params: dict | None = None, /, *, error: type = InvalidArgumentError, **constraints: Constraint):
    """Declare the constraints of a function's (or a dataclass's) arguments: ``@declare(steps=Int(min=1),
    lr=Real(min=0, min_inclusive=False), error=InvalidParameterError)``; ``params`` (a dict) for a parameter
    named ``error``. Every declared argument is checked before the body runs and passed on in its canonical
    type; a problem raises ``error`` (a type problem its :func:`type_error` variant) naming the argument. The
    declaration is recorded as ``__tokensel_params__`` on the function (on the class for a dataclass, whose
    ``__init__`` checks the fields before setting any)."""
    declared = {**(params or {}), **constraints}

    def decorate(obj):
        if isinstance(obj, type):
            init = obj.__init__  # type: ignore[misc]
            decl = Declaration(init, declared, error)
            obj.__init__ = decl.wrap(init)  # type: ignore[misc]
            obj.__tokensel_params__ = decl  # type: ignore[attr-defined]
            return obj
        return Declaration(obj, declared, error).wrap(obj)

    return decorate


def unchecked(fn: _F) -> _F:
    """``fn`` without its declared checks: for a loop inside the library that calls a declared function many
    times with arguments it has already checked (a gradient per step)."""
    return getattr(fn, "__wrapped__", fn)


def check_fields(obj) -> None:
    """Check the current fields of an instance of a declared dataclass against its declaration (a tensor
    written into in place after construction, for example); raises the declaration's error."""
    decl: Declaration = type(obj).__tokensel_params__
    dims: dict = {}
    for name in decl.params:
        decl.validate(name, getattr(obj, name), dims)
