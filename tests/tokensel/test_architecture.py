"""The library's shape: layered imports (no cycles, nothing imports upward), the book's tooling kept in
tokensel_book, and no block of six or more lines written twice inside lib/."""

import ast
import re
from collections import defaultdict
from pathlib import Path

import tomllib
import yaml

import tokensel as ts

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib" / "tokensel"

# the library's folders, lowest first: a module imports only modules of its own folder or of folders below it
# (ARCHITECTURE.md); the plumbing is the top-level modules
FOLDERS = ["plumbing", "data", "models", "training", "analysis", "experiments", "namespace"]
PLUMBING = {"errors", "version", "files", "loss", "config", "validation", "seeding"}


def folder(mod: str) -> str:
    if mod in ("__init__", "__main__"):
        return "namespace"
    head = mod.split(".")[0]
    return "plumbing" if head in PLUMBING else head


def _modules():
    for f in sorted(LIB.rglob("*.py")):
        yield ".".join(f.relative_to(LIB).with_suffix("").parts).replace(".__init__", ""), f


def _absolute(name: str) -> str:
    """The module of an absolute import of tokensel: ``tokensel`` is the namespace (``__init__``)."""
    return "__init__" if name == "tokensel" else name.removeprefix("tokensel.")


def _imports(mod: str, path: Path) -> set:
    """The tokensel modules ``path`` imports, relative or absolute, at any depth of the file."""
    pkg = mod.split(".")[:-1] if not path.name == "__init__.py" else mod.split(".")
    pkg = [] if mod == "__init__" else pkg
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(_absolute(a.name) for a in node.names if a.name.split(".")[0] == "tokensel")
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "tokensel":
            out.add(_absolute(node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = pkg[: len(pkg) - (node.level - 1)]
            names = [node.module] if node.module else [a.name for a in node.names]
            for name in names:
                out.add(".".join(base + name.split(".")))
    return out


def test_every_module_is_in_a_folder_and_the_top_level_is_short():
    mods = [m for m, _ in _modules()]
    assert {folder(m) for m in mods} <= set(FOLDERS), sorted({folder(m) for m in mods} - set(FOLDERS))
    top = [m for m in mods if "." not in m and folder(m) in ("plumbing", "namespace")]
    assert set(top) == PLUMBING | {"__init__", "__main__"}
    assert len(top) <= 12
    assert 4 <= len({folder(m) for m in mods} - {"plumbing", "namespace"}) <= 6


def test_no_upward_imports_and_no_cycles():
    mods = {m for m, _ in _modules()}
    rank = {name: i for i, name in enumerate(FOLDERS)}
    graph = {m: _imports(m, f) for m, f in _modules()}
    for mod, deps in graph.items():
        for dep in deps:
            assert dep in mods, f"{mod} imports {dep}, which is not a module of tokensel"
            assert rank[folder(dep)] <= rank[folder(mod)], f"{mod} ({folder(mod)}) imports {dep} ({folder(dep)})"
    # no cycles, within layers too
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for d in graph.get(m, ()):
            assert state.get(d) != "open", f"import cycle: {' -> '.join(stack + [m, d])}"
            if d not in state:
                visit(d, stack + [m])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [])


def _packages(path: Path) -> set:
    """The top-level packages ``path`` imports (absolute imports, at any depth of the file)."""
    nodes = list(ast.walk(ast.parse(path.read_text())))
    names = [a.name for n in nodes if isinstance(n, ast.Import) for a in n.names]
    return {x.split(".")[0] for x in names + [n.module or "" for n in nodes if isinstance(n, ast.ImportFrom)]}


def test_the_library_never_imports_the_books_machinery():
    assert not [mod for mod, f in _modules() if "tokensel_book" in _packages(f)]


def test_numba_is_imported_by_the_kernels_module_alone():
    # numba's cache is keyed by the kernel's file: a helper elsewhere could change without invalidating it
    assert [mod for mod, f in _modules() if "numba" in _packages(f)] == ["models.kernels"]


def _code_lines(path: Path):
    """(line number, normalised text) of the lines that carry code: no blank lines, comments, docstrings."""
    tree = ast.parse(path.read_text())
    doc = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(getattr(node, "value", None), ast.Constant)
            and isinstance(node.value.value, str)
        ):
            doc.update(range(node.lineno, node.end_lineno + 1))
    for i, line in enumerate(path.read_text().splitlines(), 1):
        text = re.sub(r"\s+", " ", line.strip())
        if text and not text.startswith("#") and i not in doc and not text.startswith(("import ", "from ")):
            yield i, text


def test_no_block_of_six_lines_written_twice_in_lib():
    window = 6
    seen = defaultdict(list)
    for f in sorted((ROOT / "lib").rglob("*.py")):
        mod = str(f.relative_to(ROOT / "lib"))
        lines = list(_code_lines(f))
        for k in range(len(lines) - window + 1):
            block = tuple(t for _, t in lines[k : k + window])
            if sum(len(t) for t in block) < 120:  # short structural lines (e.g. closing brackets) do not count
                continue
            seen[block].append(f"{mod}:{lines[k][0]}")
    repeated = {b: where for b, where in seen.items() if len(where) > 1}
    assert not repeated, "\n\n".join(f"{', '.join(w)}:\n" + "\n".join(b) for b, w in repeated.items())


def test_every_name_of_the_namespace_resolves():
    for name in ts.__all__:
        assert getattr(ts, name) is not None, name
    assert ts.train_p is ts.training.phases.train_p


def test_version_is_the_projects():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert ts.__version__ == meta["project"]["version"]


def test_license_and_citation_agree_with_the_project():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MIT" and meta["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == ts.__version__ and cff["license"] == "MIT"
    paper = cff["preferred-citation"]
    authors = [a["family-names"] for a in paper["authors"]]
    assert paper["year"] == 2025 and authors == ["Wu", "Shevchenko", "Oymak", "Mondelli"]


# library modules whose tests live in a module named otherwise (in the test folder mirroring theirs)
# fmt: off
TESTED_IN = {
    "version": "test_architecture", "data": "test_batch", "models": "test_attention", "training": "test_phases",
    "analysis": "test_statistics", "experiments": "test_experiments", "analysis.shapes": "test_statistics",
    "experiments.recipes": "test_experiments", "training.variants": "test_train_variant",
    "experiments.baseline": "test_realdata", "experiments.tables": "test_experiments",
    "experiments.records": "test_experiments", "__main__": "test_cli", "__init__": "test_fuzz",
}
# fmt: on


def test_every_library_module_has_a_test_module_in_the_mirrored_folder():
    """Issue 47 (6): tests/tokensel/models/ tests lib/tokensel/models/, and so on."""
    missing = []
    for mod, path in _modules():
        folder = path.parent.relative_to(LIB)
        name = TESTED_IN.get(mod, "test_" + mod.split(".")[-1])
        if not (ROOT / "tests" / "tokensel" / folder / f"{name}.py").is_file():
            missing.append(f"{mod} (tests/tokensel/{folder}/{name}.py)")
    assert not missing, f"library modules without a test module: {missing}"


def test_test_folders_mirror_the_library_and_every_test_asserts():
    """A test folder names a library folder; a test function asserts (itself, via pytest.raises or a helper)."""
    tests = ROOT / "tests"
    folders = {p.parent.relative_to(tests) for p in tests.rglob("test_*.py")}
    libs = {Path("scripts")} | {Path(p.parent.relative_to(ROOT / "lib")) for p in (ROOT / "lib").rglob("__init__.py")}
    assert folders <= libs, f"test folders without a library folder: {sorted(map(str, folders - libs))}"
    silent = []
    checks = {"raises", "warns", "fail", "assert_close", "assert_allclose", "assert_array_equal"}
    for path in tests.rglob("test_*.py"):
        tree = ast.parse(path.read_text())

        def asserts(node, helpers=frozenset()) -> bool:
            return any(
                isinstance(m, ast.Assert)
                or (isinstance(m, ast.Attribute) and m.attr in checks)
                or (isinstance(m, ast.Call) and isinstance(m.func, ast.Name) and m.func.id in helpers)
                for m in ast.walk(node)
            )

        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        helpers = frozenset(n.name for n in functions if not n.name.startswith("test_") and asserts(n))
        silent += [
            f"{path.name}::{n.name}" for n in functions if n.name.startswith("test_") and not asserts(n, helpers)
        ]
    assert not silent, f"tests that assert nothing: {silent}"
