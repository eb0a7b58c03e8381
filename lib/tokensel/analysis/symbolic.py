"""The book's exact identities, derived with sympy: each function returns a column of differences that must
simplify to 0, for symbolic entries of a small case (symbolic ``E``, ``p``, ``v``, labels) or for symbolic sizes
where sympy can. Derivatives are sympy's own, so a closed form is checked against the chain rule, not against
itself. ``tokensel_book.prove`` makes a claim of one."""

from __future__ import annotations

import sympy as sp

#: the small case: two sequences over three tokens, token 0 twice in the first (counts, not only presence, matter)
SEQUENCES = ((0, 1, 0), (1, 2))


def _matrix(name: str, rows: int, cols: int = 1) -> sp.Matrix:
    return sp.Matrix(rows, cols, sp.symbols(f"{name}:{rows * cols}", real=True))


def _softmax(scores: list) -> list:
    e = [sp.exp(a) for a in scores]
    return [x / sum(e) for x in e]


def _grad(loss, M: sp.Matrix) -> sp.Matrix:
    return M.applyfunc(lambda x: sp.diff(loss, x))


def _rational(M: sp.Matrix) -> sp.Matrix:
    """``M`` with each ``exp(k b)`` written ``Q_b^k`` (``Q_b = exp(b) > 0``, ``b`` real): exact, and it leaves
    sympy a rational function, which it decides fast (``exp(2b)`` and ``exp(b)^2`` are otherwise two atoms)."""
    found: dict = {}

    def power(x):
        k, base = x.args[0].as_content_primitive()
        k, base = (-k, -base) if base.could_extract_minus_sign() else (k, base)
        return found.setdefault(base, sp.Symbol(f"exp{len(found)}", positive=True)) ** k

    return M.applyfunc(lambda e: e.replace(lambda x: isinstance(x, sp.exp), power))


def _binary_case(d: int):
    """Symbolic ``E`` (|S| x d), ``p``, ``v`` and labels ``y`` of the small case; its outputs, attentions and loss."""
    E, p, v = _matrix("E", 1 + max(map(max, SEQUENCES)), d), _matrix("p", d), _matrix("v", d)
    y = sp.symbols(f"y:{len(SEQUENCES)}", real=True)
    q = [_softmax([(E[s, :] * p)[0] for s in seq]) for seq in SEQUENCES]
    f = [sum(q[i][t] * (E[s, :] * v)[0] for t, s in enumerate(seq)) for i, seq in enumerate(SEQUENCES)]
    loss = sum(sp.log(1 + sp.exp(-yi * fi)) for yi, fi in zip(y, f, strict=True)) / len(f)  # l(z) = log(1 + e^-z)
    return E, p, v, y, q, f, loss


def gradient(d: int = 2) -> sp.Matrix:
    """prop-gradient: sympy's derivatives of ``L`` equal ``A p^T + B v^T``, ``E^T A`` and ``E^T B``."""
    E, p, v, y, q, f, loss = _binary_case(d)
    A, B = sp.zeros(E.rows, 1), sp.zeros(E.rows, 1)
    for i, seq in enumerate(SEQUENCES):
        g = -y[i] / (1 + sp.exp(y[i] * f[i])) / len(SEQUENCES)  # (1/n) l'(y f) y, with l'(z) = -1/(1 + e^z)
        for t, s in enumerate(seq):
            A[s] += g * q[i][t] * ((E[s, :] * v)[0] - f[i])
            B[s] += g * q[i][t]
    closed = (A * p.T + B * v.T, E.T * A, E.T * B)
    diffs = [(_grad(loss, X) - C).reshape(len(C), 1) for X, C in zip((E, p, v), closed, strict=True)]
    return _rational(sp.Matrix.vstack(*diffs))


def one_step(d: int = 2) -> sp.Matrix:
    """lem-one-step: from ``p = 0`` a step of size eta0 moves ``E_s`` by
    ``(eta0/n) sum_i sigma(-y_i f_i) y_i n_s(X_i)/T_i v``, exactly."""
    E, p, v, y, _, f, loss = _binary_case(d)
    eta0, at_zero = sp.Symbol("eta0", real=True), {x: 0 for x in p}
    closed = sp.zeros(E.rows, d)
    for i, seq in enumerate(SEQUENCES):
        sigma = 1 / (1 + sp.exp(y[i] * f[i].subs(at_zero)))  # sigma(-y_i f_i)
        for s in seq:  # a term per occurrence: n_s(X_i) / T_i in all
            closed[s, :] += eta0 / len(SEQUENCES) * sigma * y[i] / len(seq) * v.T
    return _rational((-eta0 * _grad(loss, E).subs(at_zero) - closed).reshape(E.rows * d, 1))


def one_step_multiclass(classes: int = 3) -> sp.Matrix:
    """lem-one-step-multiclass, its exact form: from ``p = 0`` with cross-entropy, ``E_s`` moves by
    ``(eta0/n) sum_i sum_k (1{y_i = k} - P_ik) n_s(X_i)/T_i v_k`` for any ``V`` (orthonormal ``v_k`` read it off)."""
    seqs = (*SEQUENCES, (2, 0))
    labels = [i % classes for i in range(len(seqs))]
    E, V, eta0 = _matrix("E", 3, classes), _matrix("V", classes, classes), sp.Symbol("eta0", real=True)
    logits = [sum((E[s, :] * V for s in seq), sp.zeros(1, classes)) / len(seq) for seq in seqs]  # p = 0: q = 1/T
    P = [_softmax(list(f)) for f in logits]
    loss = -sum(sp.log(P[i][labels[i]]) for i in range(len(seqs))) / len(seqs)
    closed = sp.zeros(*E.shape)
    for i, seq in enumerate(seqs):
        for s in seq:
            for k in range(classes):
                closed[s, :] += eta0 / len(seqs) * (int(labels[i] == k) - P[i][k]) / len(seq) * V[:, k].T
    return _rational((-eta0 * _grad(loss, E) - closed).reshape(len(E), 1))


def alpha_gap(n: int = 4) -> sp.Matrix:
    """eq-alpha-gap: with equal lengths ``T``, ``alpha_s = freq_s Delta_s`` for symbolic counts ``n_s(X_i)`` and
    labels ``y_i`` in {-1, +1} (``(1 +- y_i)/2`` picks the positive or the negative sequences)."""
    T = sp.Symbol("T", positive=True)
    y, c = sp.symbols(f"y:{n}", real=True), sp.symbols(f"c:{n}", nonnegative=True)
    alpha = sum(y[i] * c[i] for i in range(n)) / (n * T)
    pos, neg = (sum((1 + sign * y[i]) / 2 * c[i] for i in range(n)) for sign in (1, -1))
    return sp.Matrix([alpha - (pos + neg) / (n * T) * (pos - neg) / (pos + neg)])


def u_shape() -> sp.Matrix:
    """prop-u-shape where it is exact. Symbolic sizes: ``c*`` (``a`` on important, ``b`` on irrelevant tokens) has
    every constraint active, meets the KKT conditions of ``min ||c||^2`` with the multipliers
    ``2 / (m_imp + m_irr) > 0``, and its value is ``m_imp m_irr / (m_imp + m_irr)``. Three important and two
    irrelevant tokens, symbolic ``alpha`` (important ones summing to 0) and ``beta``: ``(I + beta alpha alpha^T) c*
    = c*``, so the true norm ``c^T (E E^T)^{-1} c`` has the surrogate's gradient and value at ``c*``."""
    m_imp, m_irr, beta = sp.symbols("m_imp m_irr beta", positive=True)
    a, b, lam = m_irr / (m_imp + m_irr), -m_imp / (m_imp + m_irr), 2 / (m_imp + m_irr)
    value = m_imp * m_irr / (m_imp + m_irr)
    sizes = [a - b - 1, 2 * a - lam * m_irr, 2 * b + lam * m_imp, m_imp * a**2 + m_irr * b**2 - value]
    small = {m_imp: 3, m_irr: 2}
    a1, a2 = sp.symbols("alpha1 alpha2", real=True)
    alpha = sp.Matrix([a1, a2, -a1 - a2, 0, 0])
    c = sp.Matrix([a, a, a, b, b]).subs(small)
    gram = sp.eye(5) + beta * alpha * alpha.T
    return sp.Matrix([*sizes, *(gram * c - c), (c.T * c)[0] - value.subs(small)])


def mirror(d: int = 2) -> sp.Matrix:
    """prop-mirror: ``f = v^T W2 phi(W1 z)`` (any activation ``phi``, any loss ``l``) and its mirror image
    ``(-v, -W2)`` have equal outputs, equal gradients in ``E``, ``p``, ``W1`` and opposite ones in ``v``, ``W2``;
    Adam's step is odd in the gradient and the first moment (its second moment is even)."""
    phi, ell, y = sp.Function("phi"), sp.Function("l"), sp.Symbol("y", real=True)
    E, p, W1 = _matrix("E", 2, d), _matrix("p", d), _matrix("W1_", d, d)
    q = _softmax([(E[s, :] * p)[0] for s in (0, 1)])
    z = q[0] * E[0, :].T + q[1] * E[1, :].T

    def output(v, W2):
        return (v.T * W2 * (W1 * z).applyfunc(phi))[0]

    v, W2 = _matrix("v", d), _matrix("W2_", d, d)
    f = output(v, W2)
    mirrored = {x: -x for x in [*v, *W2]}
    diffs = [output(-v, -W2) - f]
    for M, sign in ((E, 1), (p, 1), (W1, 1), (v, -1), (W2, -1)):
        grad = _grad(ell(y * f), M)  # the mirror's gradient is this one at (-v, -W2)
        diffs += list(grad.xreplace(mirrored) - sign * grad)  # equal in E, p, W1; opposite in v, W2
    g, m = sp.symbols("g m", real=True)
    s, b1, b2, t, lr, eps = sp.symbols("s beta1 beta2 t lr eps", positive=True)

    def adam(g, m):
        return -lr * (b1 * m + (1 - b1) * g) / (1 - b1**t) / (sp.sqrt((b2 * s + (1 - b2) * g**2) / (1 - b2**t)) + eps)

    return sp.Matrix([*diffs, adam(-g, -m) + adam(g, m)])


#: every derivation, by the label of the statement it proves
DERIVATIONS = {
    "prop-gradient": gradient,
    "lem-one-step": one_step,
    "lem-one-step-multiclass": one_step_multiclass,
    "eq-alpha-gap": alpha_gap,
    "prop-u-shape": u_shape,
    "prop-mirror": mirror,
}
