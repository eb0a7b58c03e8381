"""A standard baseline for the real reviews: L2-regularised bag-of-words logistic regression on the same
vocabulary and split (what scikit-learn's ``LogisticRegression`` on ``CountVectorizer(binary=True)`` fits),
with numpy and scipy only. Chapter 06 sets the one-layer model's accuracy beside it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.batch import Batch, RaggedBatch
from ..data.reviews import REVIEW_DATA, ReviewData
from ..errors import InvalidArgumentError
from ..validation import Choice, Int, Numbers, Real, declare

#: the regularisation strengths tried (scikit-learn's ``C``: the loss summed over reviews plus ``|w|^2 / (2C)``)
C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)


FEATURES = Choice("binary", "count")


@declare(batch=Batch(), kind=FEATURES)
def bow_features(batch: RaggedBatch, kind: str = "binary"):
    """The reviews as a sparse reviews x words matrix: 1 where a word occurs, or its occurrences."""
    from scipy import sparse

    rows = batch.seg.cpu().numpy()
    cols = batch.ids.cpu().numpy()
    X = sparse.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(batch.n, batch.vocab_size))
    X.sum_duplicates()
    if kind == "binary":
        X.data[:] = 1.0
    return X


def _labels(batch: RaggedBatch) -> np.ndarray:
    if batch.num_classes is not None:
        raise InvalidArgumentError("the baseline needs ±1 labels, got a multi-class batch")
    return batch.labels.cpu().numpy().astype(np.float64)


def _fit(X, y: np.ndarray, C: float, max_iter: int, start: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Weights and intercept minimising ``sum_i log(1 + exp(-y_i (x_i w + b))) + |w|^2 / (2C)`` (L-BFGS)."""
    from scipy.optimize import minimize
    from scipy.special import expit

    def objective(theta):
        w, b = theta[:-1], theta[-1]
        z = y * (X @ w + b)
        loss = np.sum(np.logaddexp(0.0, -z)) + w @ w / (2 * C)
        g = -y * expit(-z)  # d loss / d (x w + b)
        return loss, np.append(X.T @ g + w / C, g.sum())

    x0 = np.zeros(X.shape[1] + 1) if start is None else start
    res = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    return res.x[:-1], float(res.x[-1])


def _scores(X, y: np.ndarray, w: np.ndarray, b: float) -> tuple[float, float]:
    """Accuracy (``sign(x w + b) = y``; 0 counts as wrong) and mean logistic loss."""
    z = y * (X @ w + b)
    return float(np.mean(z > 0)), float(np.mean(np.logaddexp(0.0, -z)))


@dataclass
class Baseline:
    """The chosen ``C``, every ``C``'s validation accuracy, the refitted weights and their scores."""

    features: str
    C: float
    validation: dict
    w: np.ndarray
    b: float
    train_acc: float
    train_loss: float
    test_acc: float
    test_loss: float

    def summary(self) -> dict:
        """The chosen ``C`` and the four scores."""
        return dict(
            C=self.C,
            train_acc=self.train_acc,
            train_loss=self.train_loss,
            test_acc=self.test_acc,
            test_loss=self.test_loss,
        )


@declare(
    data=REVIEW_DATA,
    features=FEATURES,
    C_grid=Numbers(float, min=0.0, min_inclusive=False),
    holdout=Real(min=0.0, max=1.0, min_inclusive=False, max_inclusive=False),
    seed=Int(min=0),
    max_iter=Int(min=1),
)
def logistic_baseline(
    data: ReviewData,
    features: str = "binary",
    C_grid=C_GRID,
    holdout: float = 0.2,
    seed: int = 0,
    max_iter: int = 500,
) -> Baseline:
    """The baseline on ``data``: ``C`` chosen by accuracy on a held-out ``holdout`` of the training reviews (the
    smallest among ties), refitted on all of them and scored on the test reviews. Introduced in chapter 06."""
    grid = sorted(C_grid)
    Xtr, ytr = bow_features(data.train, features), _labels(data.train)
    Xte, yte = bow_features(data.test, features), _labels(data.test)
    perm = np.random.default_rng(seed).permutation(len(ytr))
    cut = int(round(holdout * len(ytr)))
    if cut < 1 or cut >= len(ytr):
        raise InvalidArgumentError(
            f"holdout = {holdout} of {len(ytr)} training reviews leaves no review on one side: change holdout"
        )
    val, fit = np.sort(perm[:cut]), np.sort(perm[cut:])
    validation, solutions = {}, {}
    start = None
    for C in grid:  # increasing C, each fit started from the previous one's solution
        w, b = _fit(Xtr[fit], ytr[fit], C, max_iter, start)
        start = solutions[C] = np.append(w, b)
        validation[C] = _scores(Xtr[val], ytr[val], w, b)[0]
    best = max(validation.values())
    C = min(c for c, acc in validation.items() if acc == best)
    w, b = _fit(Xtr, ytr, C, max_iter, solutions[C])
    train_acc, train_loss = _scores(Xtr, ytr, w, b)
    test_acc, test_loss = _scores(Xte, yte, w, b)
    return Baseline(features, C, validation, w, b, train_acc, train_loss, test_acc, test_loss)
