"""tokensel.training.settings: the one set of training settings, checked when made."""

from pathlib import Path

import pytest

import tokensel as ts


def test_defaults_are_the_papers_and_fields_are_canonical():
    s = ts.TrainSettings()
    fields = (s.steps, s.lr, s.eval_every, s.checkpoint, s.checkpoint_every, s.progress)
    assert fields == (300, 3e-3, 25, None, 25, None)
    t = ts.TrainSettings(steps=10, lr=1, checkpoint="run.pt", progress=False)
    assert isinstance(t.lr, float) and t.lr == 1.0 and t.checkpoint == Path("run.pt")


def test_replace_checks_again_and_refuses_unknown_fields():
    s = ts.TrainSettings(steps=10)
    assert s.replace(lr=1e-2).lr == 1e-2 and s.replace(lr=1e-2).steps == 10
    pytest.raises(ts.TokenselError, lambda: s.replace(lr=-1.0)).match("lr")
    pytest.raises(ts.TokenselError, lambda: s.replace(learning_rate=1e-2)).match("no field")
    with pytest.raises(AttributeError):
        s.lr = 1.0  # frozen
