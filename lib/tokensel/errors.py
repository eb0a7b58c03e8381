"""Exceptions raised by ``tokensel``: each is a :class:`TokenselError` and the built-in exception a caller
would catch (``ValueError`` for a bad value, ``TypeError`` for a wrong type, ``FileNotFoundError`` for missing
data, ...), so ``except ValueError`` keeps working while the message names the argument and the fix."""


class TokenselError(Exception):
    """Base class of every error raised by tokensel."""


class InvalidArgumentError(TokenselError, ValueError):
    """An argument has a value the function does not accept (out of range, wrong shape, NaN, ...)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has a type the function does not accept (also a ``TypeError``; ``except
    InvalidArgumentError`` catches every bad argument)."""


#: the names of the bad batches and bad parameters, kept for readers' code: one class since the errors merged
InvalidBatchError = InvalidParameterError = InvalidArgumentError


class InfeasibleSVMError(InvalidArgumentError):
    """The max-margin (ATT-SVM) problem has no solution for the requested selection.

    ``cycle``: token ids ``s_0, s_1, ..., s_0`` whose pair constraints ``c_{s_i} - c_{s_{i+1}} >= 1`` sum to
    ``0 >= len(cycle) - 1``, when one was found; ``sequences``: the sequences whose constraints conflict, when
    the dense form (:func:`tokensel.analysis.dense.att_svm_dense`) found them.

    Introduced in chapter 05.
    """

    def __init__(self, message, cycle=None, sequences=None):
        super().__init__(message)
        self.cycle = cycle
        self.sequences = sequences


class SolverError(TokenselError, RuntimeError):
    """A convex solver is missing, or stopped without an answer: nothing is known about feasibility."""


class DivergenceError(TokenselError, ArithmeticError):
    """Training produced a non-finite loss or gradient at ``step``; the model holds the parameters from before."""

    def __init__(self, message, step=None):
        super().__init__(message)
        self.step = step


class CheckpointError(InvalidArgumentError):
    """A checkpoint file cannot be used for this run (unreadable, of another format or run); it is left as it is."""


class StorageError(TokenselError, OSError):
    """A file or folder the library writes, reads back or locks cannot be used; nothing half-written is left."""


class UnknownWordError(TokenselError, KeyError):
    """A word is not in the vocabulary."""


class DataUnavailableError(TokenselError, FileNotFoundError):
    """A data set could be loaded neither from the local data directory nor from the hub."""
