"""tokensel.config: every TOKENSEL_* setting, read when it is used."""

import pytest

import tokensel as ts
from tokensel import config
from tokensel.data import imdb_archive
from tokensel.errors import DataUnavailableError, InvalidArgumentError


def test_settings_are_read_when_used(monkeypatch):
    monkeypatch.setenv("TOKENSEL_THREADS", "3")
    assert config.threads() == 3
    monkeypatch.setenv("TOKENSEL_THREADS", "zero")
    pytest.raises(InvalidArgumentError, lambda: ts.seed_everything(0)).match("TOKENSEL_THREADS")
    monkeypatch.setenv("TOKENSEL_PROGRESS", "off")
    assert not config.progress()


def test_a_urls_password_is_never_repeated_in_an_error(monkeypatch, tmp_path):
    url = "https://alice:s3cret-pw@mirror.invalid:8443/aclImdb_v1.tar.gz"
    assert config.redact(url) == "https://***@mirror.invalid:8443/aclImdb_v1.tar.gz"
    assert "s3cret" not in config.redact_text(f"failed to fetch {url} (401)")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("TOKENSEL_CACHE_DIR", str(tmp_path))
    with pytest.raises(DataUnavailableError) as info:
        imdb_archive.fetch(url)
    assert "s3cret" not in str(info.value) and "mirror.invalid" in str(info.value)


@pytest.mark.parametrize("value", ["²", "1²", "１２", "٣", "_", "1__0", "9" * 5000, "-1", "1.5"])
def test_environment_numbers_that_are_digits_but_not_integers_are_refused(monkeypatch, value):
    monkeypatch.setenv("TOKENSEL_THREADS", value)
    monkeypatch.setenv("TOKENSEL_YELP_SIZE", value)
    for read in (config.threads, config.yelp_size):
        pytest.raises(InvalidArgumentError, read).match("environment variable")
