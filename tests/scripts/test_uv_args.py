"""scripts/uv_args.py: the uv arguments that give uv the package sources pip is configured with."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "uv_args.py"
_spec = importlib.util.spec_from_file_location("uv_args", SCRIPT)
assert _spec is not None and _spec.loader is not None
uv_args = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uv_args)


def test_pips_precedence_is_kept_environment_over_install_over_global():
    listing = """global.index-url='https://global.example/simple'
install.index-url='https://install.example/simple'
:env:.find-links='/wheels/a /wheels/b'
global.find-links='/wheels/global'
global.extra-index-url='file:///one file:///two'
global.cert='/etc/ssl/cert.pem'"""
    settings = uv_args.pip_settings(listing)
    assert settings == {
        "index-url": ["https://install.example/simple"],
        "find-links": ["/wheels/a", "/wheels/b"],
        "extra-index-url": ["file:///one", "file:///two"],
    }
    args = uv_args.uv_arguments(settings)
    assert args[-2:] == ["--index-strategy", "unsafe-best-match"]
    assert shlex.split(shlex.join(args)).count("--find-links") == 2


def test_no_configured_source_gives_no_argument():
    assert uv_args.uv_arguments(uv_args.pip_settings("global.cert='/etc/ssl/cert.pem'\n")) == []


def test_a_setting_that_is_not_a_string_is_refused():
    pytest.raises(SystemExit, lambda: uv_args.pip_settings("global.find-links=3")).match("cannot read pip's setting")
