"""tokensel_book.exercises: the exercises' self-checks say right or not yet with a hint, never raise, record no
claim, and each one the chapters call is declared, with the answers and the chapter objects it declares."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

import tokensel as ts
from tokensel_book.assignments import self_checks
from tokensel_book.exercises import EXERCISES, self_check

ROOT = Path(__file__).resolve().parents[1]


def test_right_not_yet_and_waiting(capsys, tmp_path):
    assert self_check("ex-model-alpha", alpha_good=0.0, gap_good=0) is True
    out = capsys.readouterr().out
    assert out.startswith("self-check ex-model-alpha: right") and "alpha_good: right" in out
    assert self_check("ex-model-alpha", alpha_good=0.25, gap_good=torch.tensor(0.0)) is False
    out = capsys.readouterr().out
    assert "not yet (1 of 2 right)" in out and "alpha_good: not yet: alpha_s averages" in out
    assert "gap_good: right" in out
    assert self_check("ex-model-alpha", alpha_good=None, gap_good=None) is None
    assert "waiting for your answer: set alpha_good, gap_good" in capsys.readouterr().out
    assert self_check("ex-model-alpha", alpha_good=None, gap_good=0.0) is None  # the one given is right
    assert "alpha_good: waiting for your answer" in capsys.readouterr().out
    assert self_check("ex-model-alpha", alpha_good="zero", gap_good=float("nan")) is False
    assert capsys.readouterr().out.count("a finite number is needed") == 2
    assert not (tmp_path / "checks").exists()  # no claim recorded


def test_a_self_check_never_raises(capsys):
    assert self_check("ex-nowhere", x=1.0) is None
    assert "no such self-check" in capsys.readouterr().out
    assert self_check("ex-model-alpha", alpha_good=0.0, gap_good=0.0, beta=1.0) is None
    assert "takes the answers alpha_good, gap_good" in capsys.readouterr().out
    assert self_check("ex-div-small-eta", min_lead=0.0) is None
    assert "given=dict(batch=batch, important=important, d=d, seed=seed)" in capsys.readouterr().out
    assert self_check("ex-div-small-eta", min_lead=0.0, given=dict(batch=1, important=2, d=3, seed=4)) is None
    assert "could not check" in capsys.readouterr().out
    assert self_check(3) is None


def test_verdicts_are_appended_to_the_grades_file(monkeypatch, tmp_path):
    grades = tmp_path / "g" / "grades.jsonl"
    monkeypatch.setenv("TOKENSEL_GRADES", str(grades))
    self_check("ex-model-alpha", alpha_good=0.0, gap_good=1.0)
    self_check("ex-one-step-width", width=None)
    lines = [json.loads(x) for x in grades.read_text().splitlines()]
    assert lines[0] == {
        "exercise": "ex-model-alpha",
        "answers": {"alpha_good": "right", "gap_good": "not yet"},
        "right": 1,
        "of": 2,
    }
    assert lines[1]["answers"] == {"width": "missing"}


def test_the_references_agree_with_the_solutions(capsys):
    # ex-one-step-width: d > 8 log(2|S|/delta) / (eta0 a)^2; 67 is right, 100 is not
    assert self_check("ex-one-step-width", width=67) is True
    assert self_check("ex-one-step-width", width=100) is False
    # ex-one-step-quadruple on small data: the fit's prediction and the measured error
    data = ts.synthetic.independent_tokens(n=100, vocab_size=20, length=6, delta=0.8, seed=0)
    given = dict(batch=data.batch, eta0=5.0, seed=1, slope=-0.5, intercept=0.1)
    m0 = ts.AttentionModel.init(20, 16384, seed=1)
    target = torch.outer(2.5 * ts.statistics.alpha(data.batch), m0.v)
    measured = float((ts.one_step(m0, data.batch, 5.0).E - m0.E - target).norm() / target.norm())
    predicted = math.exp(0.1) * 16384**-0.5
    assert self_check("ex-one-step-quadruple", predicted=predicted, measured=measured, given=given) is True
    assert self_check("ex-one-step-quadruple", predicted=predicted * 2, measured=measured, given=given) is False
    # ex-div-small-eta: one step of size 1 from the chapter's initialisation
    pairs = ts.synthetic.assumption1_pairs(n_pairs=20, n_important=2, n_irrelevant=8, length=5, seed=0)
    important = torch.from_numpy(pairs.planted != 0)
    m1 = ts.one_step(ts.AttentionModel.init(pairs.batch.vocab_size, d=32, seed=0), pairs.batch, eta0=1.0)
    lead = float(ts.statistics.value_lead(pairs.batch, m1.values(), important).min())
    given = dict(batch=pairs.batch, important=important, d=32, seed=0)
    assert self_check("ex-div-small-eta", min_lead=lead, given=given) is True
    assert self_check("ex-div-small-eta", min_lead=lead + 0.1, given=given) is False
    capsys.readouterr()


def _chapter_calls():
    calls = []
    for md in sorted((ROOT / "book").glob("*.md")):
        text = md.read_text(encoding="utf-8")
        exercises = set(re.findall(r"^(?:`{3,}|:{3,})\{exercise\}.*\n:label:\s*(\S+)", text, re.M))
        for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, re.S):
            cell = "\n".join(line for line in cell.splitlines() if not line.startswith(":tags:"))
            calls += [(md.name, exercises, c) for c in self_checks(cell)]
    return calls


def test_every_self_check_of_the_chapters_is_declared_and_called_as_declared():
    calls = _chapter_calls()
    assert {c["exercise"] for _, _, c in calls} == set(EXERCISES), "a declared self-check no chapter calls"
    for page, exercises, call in calls:
        ex = EXERCISES[call["exercise"]]
        assert call["exercise"] in exercises, f"{page}: {call['exercise']} is no exercise of the page"
        assert call["answers"] == [a.name for a in ex.answers], f"{page}: {call}"
        given = re.findall(r"(\w+)=", call["given"] or "")
        assert given == list(ex.given), f"{page}: {call['exercise']} is given {given}, declares {list(ex.given)}"
        assert all(a.hint and (a.tol is not None or a.rel_tol is not None) for a in ex.answers)


def test_every_chapter_has_a_self_checked_exercise():
    """Each numbered chapter asks for at least one number that the reader checks by running a cell (#28 item 2);
    the other exercises ask for a proof, a derivation or an explanation."""
    from tokensel_book.toc import toc_numbers

    checked = {Path(page).stem for page, _, _ in _chapter_calls()}
    chapters = {Path(page).name for page in toc_numbers(ROOT)}
    assert chapters and chapters - checked == set(), "chapters without a self-checked exercise"


@pytest.mark.slow
def test_the_rate_exercise_reference(capsys):
    assert self_check("ex-div-rate", norm_120=None, rate_120=None, given=dict(seed=0)) is None
    more = ts.synthetic.assumption1_pairs(n_pairs=100, n_important=3, n_irrelevant=120, length=8, seed=0)
    mm = ts.one_step(ts.AttentionModel.init(more.batch.vocab_size, d=256, seed=0), more.batch, eta0=100.0)
    imp = torch.from_numpy(more.planted != 0)
    norm = ts.max_margin_for_selection(mm.E, more.batch, imp[more.batch.ids]).norm
    assert self_check("ex-div-rate", norm_120=norm, rate_120=norm * 1.03, given=dict(seed=0)) is True
    assert self_check("ex-div-rate", norm_120=norm * 1.1, rate_120=norm * 1.2, given=dict(seed=0)) is False


def test_the_gap_exercise_says_right_and_not_yet(capsys):
    right = dict(gap_half=math.log(19), q_repeated=3 * math.e**2 / (3 * math.e**2 + 17))
    assert self_check("ex-sel-gap", **right) is True
    assert self_check("ex-sel-gap", gap_half=math.log(20), q_repeated=right["q_repeated"]) is False
    assert "not yet: Q = m e^a" in capsys.readouterr().out


def test_the_max_margin_exercises_agree_with_their_solutions(capsys):
    # ex-mm-by-hand: p_mm = (e_k - e_j) / 2, norm 1/sqrt(2), scores +-1/2
    right = dict(coef_k=0.5, coef_j=-0.5, norm_mm=2**-0.5, score_k=0.5, score_j=-0.5)
    assert self_check("ex-mm-by-hand", **right) is True
    assert self_check("ex-mm-by-hand", **{**right, "coef_k": 1.0, "coef_j": -1.0, "norm_mm": 2**0.5}) is False
    assert "coef_k: not yet: the one constraint" in capsys.readouterr().out
    # ex-mm-naive: exp(-gap) = eps at gap = -ln(eps) ~ 36, reached at ||p|| = gap ||p_mm|| (the solution's 36 too)
    pairs = ts.synthetic.assumption1_pairs(n_pairs=10, n_important=2, n_irrelevant=6, length=5, seed=0)
    m1 = ts.one_step(ts.AttentionModel.init(pairs.batch.vocab_size, d=32, seed=0), pairs.batch, 100.0)
    svm = ts.max_margin_for_selection(m1.E, pairs.batch, pairs.important_occurrences)
    given = dict(svm=svm)
    assert self_check("ex-mm-naive", gap_eps=36, norm_fail=36 * svm.norm, given=given) is True
    gap = -math.log(2.220446049250313e-16)
    assert self_check("ex-mm-naive", gap_eps=gap, norm_fail=gap * svm.norm, given=given) is True
    assert self_check("ex-mm-naive", gap_eps=gap, norm_fail=gap / svm.norm, given=given) is False
    capsys.readouterr()


def test_the_real_data_exercises_say_right_and_not_yet(capsys):
    # ex-real-gap: 30 positive and 10 negative occurrences give 0.5; a word seen once in a negative review -1
    assert self_check("ex-real-gap", gap_30_10=0.5, gap_once=-1) is True
    assert self_check("ex-real-gap", gap_30_10=0.75, gap_once=-1) is False
    # ex-real-ends: m = 4 occurrences, P(|Delta| = 1) = 2^(1-m) and the standard deviation 1/sqrt(m)
    assert self_check("ex-real-ends", p_ends=1 / 8, sd_gap=1 / 2) is True
    assert self_check("ex-real-ends", p_ends=1 / 16, sd_gap=1 / 2) is False
    assert "not yet: |Delta_s| = 1 when all m" in capsys.readouterr().out


def test_the_one_word_exercise_reads_the_models_own_output(capsys):
    import numpy as np

    from tokensel.data.text import Vocabulary
    from tokensel.models import variants

    vocab = Vocabulary(("the", "great", "bad", "a", "film"), np.ones(5), 1, None)
    model = variants.make("two_layer", len(vocab), 8, seed=0)
    f = 2 * float(model.E[1] @ model.v)  # H = 2 X for a one-word review: f = 2 E_s^T v
    given = dict(model=model, vocab=vocab)
    assert self_check("ex-beyond-one-word", f_great=f, given=given) is True
    assert self_check("ex-beyond-one-word", f_great=f / 2, given=given) is False  # E_s^T v alone
    assert "not yet: a review of one word" in capsys.readouterr().out
