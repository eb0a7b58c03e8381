"""tokensel.config: every TOKENSEL_* setting, read when it is used."""


import pytest

import tokensel as ts
from tokensel import config
from tokensel.errors import InvalidArgumentError




def test_settings_are_read_when_used(monkeypatch):
    monkeypatch.setenv("TOKENSEL_THREADS", "3")
    assert config.threads() == 3
    monkeypatch.setenv("TOKENSEL_THREADS", "zero")
    with pytest.raises(InvalidArgumentError, match="TOKENSEL_THREADS"):
        ts.seed_everything(0)
    monkeypatch.setenv("TOKENSEL_PROGRESS", "off")
    assert not ts.progress.enabled()
    monkeypatch.setenv("TOKENSEL_CLAIMS", "maybe")
    with pytest.raises(InvalidArgumentError, match="TOKENSEL_CLAIMS"):
        config.claims_mode()
