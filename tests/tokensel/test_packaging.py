"""The library installs on its own: a wheel built from the project's sources works outside the repository,
and the package states dependency ranges (the exact pins live in constraints.txt)."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]


def _requirement_names(lines):
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


def test_the_conda_environment_pins_both_packages_dependencies_and_installs_them():
    # Binder builds a launched page's environment from environment.yml alone
    import yaml

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = _requirement_names(line for line in pip if not line.startswith("-e"))
    pins = _requirement_names((ROOT / "constraints.txt").read_text().splitlines())
    for path in (ROOT / "pyproject.toml", ROOT / "lib" / "pyproject.toml"):
        for name in _requirement_names(tomllib.loads(path.read_text())["project"]["dependencies"]):
            if name != "tokensel":
                assert listed.get(name) == pins[name], f"environment.yml: {name} as in constraints.txt ({pins[name]})"
    assert {"-e .", "-e ./lib"} <= set(pip)


def _setuptools_for_building() -> bool:
    """Whether this interpreter's setuptools can build the project without downloading one."""
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


def _sources(tmp_path: Path) -> Path:
    """The files a distribution is built from, copied so that building leaves nothing in the checkout."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    shutil.copytree(ROOT / "lib", src / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return src


def _run(args, **kw):
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
def test_python_m_build_makes_a_wheel_of_every_module(tmp_path):
    src = _sources(tmp_path)
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(src)]
    if _setuptools_for_building():
        build.insert(4, "--no-isolation")
    _run(build)
    (wheel,) = (tmp_path / "dist").glob("tokensel-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(p.relative_to(ROOT / "lib").as_posix() for p in (ROOT / "lib" / "tokensel").rglob("*.py"))
    assert sorted(n for n in names if n.endswith(".py")) == modules


@pytest.mark.slow
def test_pip_install_dot_into_a_fresh_venv_works_outside_the_repository(tmp_path):
    """``pip install .`` into a fresh venv (deps via .pth, no editable copy) is the tokensel used outside the repo."""
    src = _sources(tmp_path)
    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=True).create(fresh)
    python = fresh / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "dependencies-of-the-test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [str(python), "-m", "pip", "install", "--no-deps", "--quiet", "."]
    if _setuptools_for_building():  # build with this environment's setuptools, not the new one's older copy
        _run([str(python), "-m", "pip", "uninstall", "--yes", "--quiet", "setuptools"])
        install.insert(5, "--no-build-isolation")
    _run(install, cwd=src)
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def run(*args):
        return _run([str(python), *args], cwd=away, env=env).stdout

    where = Path(run("-c", "import tokensel; print(tokensel.__file__)").strip())
    assert where.is_relative_to(site), where
    assert not where.is_relative_to(ROOT), where
    assert "verify" in run("-m", "tokensel", "--help")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run("-c", "import tokensel as ts; print(ts.__version__)").strip() == version
    # the library computes without the repository: the planted important tokens of the theory's synthetic data
    out = run("-c", "import tokensel as ts; print(int(ts.synthetic.theory_pairs().important.sum()))")
    assert out.strip() == "6"
