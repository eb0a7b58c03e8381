"""The answer key of the book's self-checked exercises: each exercise's answers (names, tolerances, hints) and
the function that computes their references from the chapter's objects.

It is the teacher's: kept beside the chapters and in no package a student installs. In the book it lets the
self-checks say right or not yet; ``python -m tokensel_book grade`` runs it in the teacher's process only.
"""

import math

from tokensel_book.exercises import Answer, exercise


@exercise(
    "ex-model-alpha",
    Answer(
        "alpha_good",
        "alpha_s averages y_i n_s(X_i) / T_i over the n = 4 sequences: for each sequence, the share of its "
        "tokens that are `good`, with the sign of its label",
        tol=1e-9,
    ),
    Answer(
        "gap_good",
        "Delta_s counts occurrences: the share of the token's occurrences in positive sequences minus the share "
        "in negative ones",
        tol=1e-9,
    ),
)
def _model_alpha(given, answers):
    from tokensel.analysis.statistics import alpha, posterior_gap
    from tokensel.data.batch import RaggedBatch

    good = 0  # two positive sequences with `good` once, two negative ones, one with `good` twice (T = 4)
    batch = RaggedBatch.from_sequences(
        [[good, 1, 2, 3], [good, 4, 5, 6], [good, good, 7, 8], [9, 10, 11, 12]], [1, 1, -1, -1], vocab_size=13
    )
    return {"alpha_good": float(alpha(batch)[good]), "gap_good": float(posterior_gap(batch)[good])}


@exercise(
    "ex-one-step-quadruple",
    Answer(
        "predicted",
        "evaluate the least-squares line of the sweep at d = 16384: exp(intercept) * 16384**slope",
        rel_tol=0.01,
    ),
    Answer(
        "measured",
        "take one step of size eta0 from ts.AttentionModel.init(batch.vocab_size, 16384, seed=seed) and compute "
        "the relative error of the lemma, ||E1 - E0 - (eta0/2) alpha v^T||_F / ||(eta0/2) alpha v^T||_F",
        rel_tol=1e-6,
    ),
    given=("batch", "eta0", "seed", "slope", "intercept"),
)
def _one_step_quadruple(given, answers):
    from tokensel.experiments.theory import one_step_error

    predicted = math.exp(given["intercept"]) * 16384 ** given["slope"]
    return {"predicted": predicted, "measured": one_step_error(given["batch"], given["eta0"], 16384, given["seed"])}


@exercise(
    "ex-one-step-width",
    Answer(
        "width",
        "bound every initial value |E0_s^T v| by t with a union bound over the |S| tokens, "
        "P(|N(0, 1/d)| > t) <= 2 exp(-d t^2 / 2), then ask (eta0/2) a > t and solve for d",
        rel_tol=0.02,
    ),
)
def _one_step_width(given, answers):
    vocab, eta0, a, delta = 100, 200.0, 0.005, 0.05  # the numbers of the exercise
    return {"width": 8 * math.log(2 * vocab / delta) / (eta0 * a) ** 2}


@exercise(
    "ex-div-small-eta",
    Answer(
        "min_lead",
        "take one step of size 1 (not eta0) from the chapter's initialisation ts.AttentionModel.init("
        "batch.vocab_size, d=d, seed=seed), then the smallest over sequences of "
        "ts.statistics.value_lead(batch, model.values(), important)",
        rel_tol=1e-6,
    ),
    given=("batch", "important", "d", "seed"),
)
def _div_small_eta(given, answers):
    from tokensel.analysis.statistics import value_lead
    from tokensel.models.attention import AttentionModel
    from tokensel.training.phases import one_step

    batch = given["batch"]
    m1 = one_step(AttentionModel.init(batch.vocab_size, d=given["d"], seed=given["seed"]), batch, eta0=1.0)
    return {"min_lead": float(value_lead(batch, m1.values(), given["important"]).min())}


@exercise(
    "ex-sel-gap",
    Answer(
        "gap_half",
        "Q = m e^a / (m e^a + T - m) passes 1/2 where e^a = (T - m) / m: the gap is ln((T - m) / m), here with "
        "T = 20 and m = 1",
        rel_tol=1e-3,
    ),
    Answer(
        "q_repeated",
        "put T = 20, m = 3 and a = 2 into Q = m e^a / (m e^a + T - m)",
        rel_tol=1e-3,
    ),
)
def _sel_gap(given, answers):
    return {"gap_half": math.log(19.0), "q_repeated": 3 * math.exp(2.0) / (3 * math.exp(2.0) + 17.0)}


@exercise(
    "ex-div-rate",
    Answer(
        "norm_120",
        "draw ts.synthetic.assumption1_pairs(n_pairs=100, n_important=3, n_irrelevant=120, length=8, seed=seed), "
        "take one step of size 100 at d = 256 (initialisation seed), and solve "
        "ts.max_margin_for_selection for the selection 'the important token of each sequence'",
        rel_tol=1e-3,
    ),
    Answer(
        "rate_120",
        "fit the slope of ||p_t|| against ln t over t >= 1e4 of a gradient flow run to t = 1e8; "
        "it should come within 5 % of ||p_mm||",
        rel_tol=0.05,
    ),
    given=("seed",),
)
def _div_rate(given, answers):
    import torch

    from tokensel.analysis.maxmargin import max_margin_for_selection
    from tokensel.data.synthetic import assumption1_pairs
    from tokensel.models.attention import AttentionModel
    from tokensel.training.phases import one_step

    seed = given["seed"]
    more = assumption1_pairs(n_pairs=100, n_important=3, n_irrelevant=120, length=8, seed=seed)
    m1 = one_step(AttentionModel.init(more.batch.vocab_size, d=256, seed=seed), more.batch, eta0=100.0)
    important = torch.from_numpy(more.planted != 0)
    norm = max_margin_for_selection(m1.E, more.batch, important[more.batch.ids]).norm
    return {"norm_120": norm, "rate_120": norm}


@exercise(
    "ex-mm-by-hand",
    Answer(
        "coef_k",
        "the one constraint is p^T (e_k - e_j) >= 1; the shortest such p lies along e_k - e_j: "
        "p_mm = (e_k - e_j) / ||e_k - e_j||^2",
        tol=1e-3,
    ),
    Answer("coef_j", "p_mm = (e_k - e_j) / ||e_k - e_j||^2, and ||e_k - e_j||^2 = 2 for orthonormal e's", tol=1e-3),
    Answer("norm_mm", "the norm of (e_k - e_j) / 2 with orthonormal e_k, e_j", tol=1e-3),
    Answer("score_k", "p_mm^T e_k is the coefficient of e_k in p_mm, as the e's are orthonormal", tol=1e-3),
    Answer("score_j", "the two scores differ by the margin 1, split evenly", tol=1e-3),
)
def _mm_by_hand(given, answers):
    import numpy as np
    import torch

    from tokensel.analysis.maxmargin import max_margin

    keys = torch.eye(2, 4, dtype=torch.float64)  # e_k and e_j, orthonormal in four dimensions
    svm = max_margin(keys, np.array([[0, 1]]))  # token 0 (e_k) selected against token 1 (e_j)
    scores = keys @ svm.p
    return {
        "coef_k": float(scores[0]),
        "coef_j": float(scores[1]),
        "norm_mm": svm.norm,
        "score_k": float(scores[0]),
        "score_j": float(scores[1]),
    }


@exercise(
    "ex-mm-naive",
    Answer(
        "gap_eps",
        "solve exp(-gap) = eps for float64's machine epsilon eps = 2.2e-16 (np.finfo(float).eps): gap = -ln(eps)",
        rel_tol=0.01,
    ),
    Answer(
        "norm_fail",
        "the smallest gap of p_mm is its margin 1, so along p_mm / ||p_mm|| the smallest gap is ||p|| / ||p_mm||; "
        "set it equal to gap_eps (the chapter's ||p_mm|| is svm.norm)",
        rel_tol=0.01,
    ),
    given=("svm",),
)
def _mm_naive(given, answers):
    gap = -math.log(2.0**-52)  # float64's machine epsilon
    return {"gap_eps": gap, "norm_fail": gap * float(given["svm"].norm)}


@exercise(
    "ex-real-gap",
    Answer(
        "gap_30_10",
        "Delta_s counts occurrences: the share of the word's 40 occurrences in positive reviews minus the share "
        "in negative ones",
        tol=1e-9,
    ),
    Answer(
        "gap_once",
        "a word seen once has all of its occurrences in the class of that one review",
        tol=1e-9,
    ),
)
def _real_gap(given, answers):
    from tokensel.analysis.statistics import posterior_gap
    from tokensel.data.batch import RaggedBatch

    word, once = 0, 1  # 30 positive and 30 negative reviews; `word` in 30 of the positive, 10 of the negative
    reviews = [[word, 2]] * 30 + [[word, 3]] * 10 + [[3, 4]] * 19 + [[once, 4]]
    labels = [1] * 30 + [-1] * 30
    gap = posterior_gap(RaggedBatch.from_sequences(reviews, labels, vocab_size=5))
    return {"gap_30_10": float(gap[word]), "gap_once": float(gap[once])}


@exercise(
    "ex-real-ends",
    Answer(
        "p_ends",
        "|Delta_s| = 1 when all m occurrences fall in one class: K = 0 or K = m, each with probability 2^-m",
        rel_tol=1e-6,
    ),
    Answer(
        "sd_gap",
        "Delta_s = (2K - m) / m with K ~ Binomial(m, 1/2): its variance is 4 Var(K) / m^2 = 1/m",
        rel_tol=1e-6,
    ),
)
def _real_ends(given, answers):
    m = 4  # the occurrences of the exercise's word
    law = {k: math.comb(m, k) / 2**m for k in range(m + 1)}  # K, its positive occurrences
    gaps = {k: (2 * k - m) / m for k in law}
    p_ends = sum(p for k, p in law.items() if abs(gaps[k]) == 1)
    mean = sum(p * gaps[k] for k, p in law.items())
    sd = math.sqrt(sum(p * (gaps[k] - mean) ** 2 for k, p in law.items()))
    return {"p_ends": p_ends, "sd_gap": sd}


@exercise(
    "ex-beyond-one-word",
    Answer(
        "f_great",
        "a review of one word: both softmaxes run over a single position, so H = X + X and f = 2 E_s^T v; take "
        "s = vocab.id('great') and compute 2 * float(model.E[s] @ model.v)",
        rel_tol=1e-4,  # the models train in float32
    ),
    given=("model", "vocab"),
)
def _beyond_one_word(given, answers):
    import torch

    from tokensel.data.batch import RaggedBatch

    model, word = given["model"], given["vocab"].id("great")
    review = RaggedBatch.from_sequences([[word]], [1], vocab_size=int(model.E.shape[0]))
    with torch.no_grad():  # the model's own output on the one-word review, not the formula
        return {"f_great": float(model.forward(review)[0])}
