"""Exceptions raised by :mod:`tokensel`.

Every error the library raises is a subclass of :class:`TokenselError` and of the built-in exception a
caller would expect (``ValueError`` for bad values, ``TypeError`` for a value of the wrong type,
``FileNotFoundError`` for missing data, ``RuntimeError`` for a solver that gave up), so
``except ValueError`` keeps working while the message names the argument and the fix.
"""


class TokenselError(Exception):
    """Base class of every error raised by tokensel."""


class InvalidArgumentError(TokenselError, ValueError):
    """An argument has a value the function does not accept (out of range, wrong shape, NaN, ...)."""


class ArgumentTypeError(TokenselError, TypeError):
    """An argument has a type the function does not accept (a float where an int is needed, ...)."""


class InvalidBatchError(InvalidArgumentError):
    """A ragged batch is malformed: bad labels, empty sequences, token ids out of range, ..."""


class InvalidParameterError(InvalidArgumentError):
    """Model parameters or training settings are invalid: wrong shape, dtype or device, NaN/inf, ..."""


class InvalidArgumentTypeError(InvalidArgumentError, ArgumentTypeError):
    """An argument of a function whose errors are :class:`InvalidArgumentError` has the wrong type (a
    ``TypeError`` and a ``ValueError``: ``except`` on the function's error class catches every problem with
    its arguments)."""


class BatchTypeError(InvalidBatchError, ArgumentTypeError):
    """An argument of a function whose errors are :class:`InvalidBatchError` has the wrong type (also a
    ``TypeError``)."""


class ParameterTypeError(InvalidParameterError, ArgumentTypeError):
    """An argument of a function whose errors are :class:`InvalidParameterError` has the wrong type (also a
    ``TypeError``)."""


class InfeasibleSVMError(InvalidArgumentError):
    """The max-margin (ATT-SVM) problem has no solution for the requested selection.

    ``cycle`` holds a list of token ids ``s_0, s_1, ..., s_0`` whose pair constraints
    ``c_{s_i} - c_{s_{i+1}} >= 1`` sum to ``0 >= len(cycle) - 1``, when one was found. ``sequences``
    holds the indices of sequences whose constraints conflict, when the dense form
    (:func:`tokensel.analysis.dense.att_svm_dense`) found them.

    Introduced in chapter 05.
    """

    def __init__(self, message, cycle=None, sequences=None):
        super().__init__(message)
        self.cycle = cycle
        self.sequences = sequences


class SolverError(TokenselError, RuntimeError):
    """A convex solver is missing, or stopped without an answer (iteration limit, numerical trouble):
    nothing is known about feasibility, unlike :class:`InfeasibleSVMError`."""


class DivergenceError(TokenselError, ArithmeticError):
    """Training produced a non-finite loss or gradient; the model holds the parameters from before
    the failing step. ``step`` is the step at which it happened."""

    def __init__(self, message, step=None):
        super().__init__(message)
        self.step = step


class CheckpointError(InvalidArgumentError):
    """A checkpoint file cannot be used for this run (unreadable, of another format, or of another run).
    The file is left as it is."""


class StorageError(TokenselError, OSError):
    """A file or folder the library writes, reads back or locks cannot be used: a folder where a file
    belongs (or the reverse), a read-only or full disk, a dangling link, a special file. Nothing half-written
    is left behind."""


class UnknownWordError(TokenselError, KeyError):
    """A word is not in the vocabulary."""


class DataUnavailableError(TokenselError, FileNotFoundError):
    """A data set could be loaded neither from the local data directory nor from the hub."""
