"""Exceptions raised by :mod:`tokensel`.

Every error the library raises on bad input is a subclass of :class:`TokenselError` and of the
built-in exception a caller would expect (``ValueError`` for bad values, ``FileNotFoundError`` for
missing data), so ``except ValueError`` keeps working while the message names the problem.
"""


class TokenselError(Exception):
    """Base class of every error raised by tokensel."""


class InvalidBatchError(TokenselError, ValueError):
    """A ragged batch is malformed: bad labels, empty sequences, token ids out of range, ..."""


class InvalidParameterError(TokenselError, ValueError):
    """Model parameters have the wrong shape, dtype or device, or contain NaN/inf."""


class InfeasibleSVMError(TokenselError, ValueError):
    """The max-margin (ATT-SVM) problem has no solution for the requested selection.

    ``cycle`` holds a list of token ids ``s_0, s_1, ..., s_0`` whose pair constraints
    ``c_{s_i} - c_{s_{i+1}} >= 1`` sum to ``0 >= len(cycle) - 1``, when one was found.
    """

    def __init__(self, message, cycle=None):
        super().__init__(message)
        self.cycle = cycle


class DataUnavailableError(TokenselError, FileNotFoundError):
    """A data set could be loaded neither from the local data directory nor from the hub."""


class ClaimFailedError(TokenselError, AssertionError):
    """A numerical claim checked with :func:`tokensel.checks.check` does not hold."""
