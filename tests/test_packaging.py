"""The library installs on its own: a wheel built from the project's sources works outside the repository,
and the package states dependency ranges (the exact pins live in constraints.txt)."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _requirement_names(lines):
    import re

    return {
        re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0].lower().replace("_", "-"): line.strip()
        for line in lines
        if line.strip() and not line.lstrip().startswith("#")
    }


def test_dependencies_are_ranges_and_constraints_pin_them():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = _requirement_names(meta["dependencies"])
    pins = _requirement_names((ROOT / "constraints.txt").read_text().splitlines())
    exact = [d for d in deps.values() if "==" in d]
    assert not exact, f"the package's dependencies state ranges; exact pins belong in constraints.txt: {exact}"
    assert deps["torch"].startswith("torch>=")
    unpinned = [name for name in deps if "==" not in pins.get(name, "")]
    assert not unpinned, f"dependencies without an exact pin in constraints.txt: {unpinned}"


def _setuptools_for_building() -> bool:
    """Whether this interpreter's setuptools can build the project without downloading one."""
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


@pytest.mark.slow
def test_the_wheel_installs_and_runs_outside_the_repository(tmp_path):
    # the sources a wheel is built from, copied so that building leaves nothing in the checkout
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    import shutil

    shutil.copytree(ROOT / "lib", src / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(src)]
    if _setuptools_for_building():
        build.insert(4, "--no-build-isolation")
    subprocess.run(build, check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = wheels.glob("tokensel-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(p.relative_to(ROOT / "lib").as_posix() for p in (ROOT / "lib" / "tokensel").rglob("*.py"))
    assert sorted(n for n in names if n.endswith(".py")) == modules

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)

    def run(*args):
        return subprocess.run(
            [sys.executable, *args], cwd=away, env=env, capture_output=True, text=True, timeout=300, check=True
        ).stdout

    where = Path(run("-c", "import tokensel; print(tokensel.__file__)").strip())
    assert where.is_relative_to(target), where
    assert "verify" in run("-m", "tokensel", "--help")
    assert (
        run("-c", "import tokensel as ts; print(ts.__version__)").strip()
        == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    )
    # the library computes without the repository: the planted important tokens of the theory's synthetic data
    out = run("-c", "import tokensel as ts; print(int(ts.synthetic.theory_pairs().important.sum()))")
    assert out.strip() == "6"
