"""Bad input to every declared function, generated from its declaration (:func:`tokensel.validation.declare`): each
value a parameter's kind refuses (``BAD``) raises an InvalidArgumentError naming it, with nothing changed; the other
parameters take valid examples (``EXAMPLES``, ``_registry``). Only a new kind or library type needs new code here."""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import math
import pkgutil
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import tokensel as ts
from tokensel import validation as v
from tokensel.analysis.maxmargin import Pairs, SVMResult
from tokensel.analysis.shapes import Table, binned
from tokensel.data.batch import Batch, RaggedBatch, Sequences
from tokensel.data.reviews import Column, Source
from tokensel.data.text import Words
from tokensel.errors import ArgumentTypeError, InvalidArgumentError, TokenselError
from tokensel.experiments.controls import ClassShapes
from tokensel.experiments.recipes import Fit, Run
from tokensel.models.mixing import MixPlan
from tokensel.training.loop import Trajectory

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------ the declared functions


def _modules():
    for info in pkgutil.walk_packages(ts.__path__, "tokensel."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def _unwrap(member):
    return member.__func__ if isinstance(member, (classmethod, staticmethod)) else member


def _public():
    """``(name, class, attribute, object)`` of every public function, class and class member of tokensel."""
    for mod in _modules():
        for name, obj in vars(mod).items():
            if getattr(obj, "__module__", None) == mod.__name__ and not name.startswith("_"):
                yield f"{mod.__name__}.{name}", None, None, obj
                for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
                    yield f"{mod.__name__}.{name}.{attr}", obj, attr, _unwrap(member)


def _declared() -> dict:
    """``{name: (owner, attribute)}`` of every declared function, class (attribute None) or method."""
    found = {}
    for name, cls, attr, obj in _public():
        if attr is None and (inspect.isfunction(obj) or inspect.isclass(obj)) and "__tokensel_params__" in vars(obj):
            found[name] = (obj, None)
        elif attr not in (None, "__init__") and hasattr(obj, "__tokensel_params__"):
            found[name] = (cls, attr)
    return found


def _declaration(owner, attr) -> v.Declaration:
    if attr is None:
        return owner.__tokensel_params__
    return _unwrap(vars(owner)[attr]).__tokensel_params__


DECLARED = _declared()

#: where a public callable at the boundary is left undeclared, and why: whole modules ...
UNDECLARED_MODULES = {
    "tokensel.models.kernels": "numba kernels on arrays that their declared callers have checked and laid out",
    "tokensel.validation": "the declaration machinery itself: the check_* functions are what the constraints call",
    "tokensel.files.path_kind": "the command lines' paths: argparse gives strings, checked by existing/writable",
    "tokensel.analysis.symbolic": "the book's identities in sympy at a few fixed small sizes, none from a user",
}
#: ... and single callables: the building blocks of a step, called once per step by a declared model or loop on
#: arguments it has checked, where a declaration would check them again per step
UNDECLARED = {
    "tokensel.files.command_failed": "the command lines' one-line report of an error they caught",
    "tokensel.files.existing": "the command lines' check of a path argument (argparse gives a string)",
    "tokensel.files.writable": "the command lines' check of an output path (argparse gives a string)",
    "tokensel.models.variants.VariantModel.forward_prepared": "the per-step forward of a declared variant",
    "tokensel.models.variants.MLPOutput.head": "the per-step head of a declared variant",
    "tokensel.models.variants.MLPOutput.forward_prepared": "the per-step forward of a declared variant",
    "tokensel.training.loop.Trajectory.append": "the loop's per-evaluation record",
    "tokensel.experiments.phase.write_followed": "writes the follow-ons that a declared phase_runs kept (runs.attrs)",
}
#: names called from outside the library that are other functions of the same name
NOT_CALLED = {
    "tokensel.data.imdb_archive.seal": "tokensel_book calls its own seal (of a record)",
    "tokensel.data.manifest.verify": "tokensel_book calls its own verify",
    "tokensel.data.imdb_archive.prepare": "the benchmarks call a variant's prepare",
    "tokensel.data.imdb_archive.describe": "the chapters call pandas' describe",
    "tokensel.data.text.encode": "tokensel_book calls str.encode",
    "tokensel.data.text.tokenize": "a word in tokensel_book's messages",
    "tokensel.training.checkpoints.save": "tokensel_book calls an image's save",
    "tokensel.training.checkpoints.load": "the scripts and tokensel_book call json's and torch's load",
    "tokensel.data.text.Vocabulary.ids": "the chapters read a batch's ids",
    "tokensel.models.variants.VariantModel.loss": "the chapters read a trajectory's loss column",
}


def _outside_calls() -> tuple[set, set]:
    """The names called or imported from tokensel outside the library, and the methods called or passed on."""
    files = [*ROOT.glob("book/*.md"), *ROOT.glob("scripts/**/*.py"), *ROOT.glob("benchmarks/**/*.py")]
    files += list(ROOT.glob("lib/tokensel_book/**/*.py"))
    text = "\n".join(f.read_text() for f in files if f.name != "api.md")
    imported = {
        n for line in re.findall(r"from tokensel[\w.]* import ([^\n(]+)", text) for n in re.findall(r"\w+", line)
    }
    called = set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text)) | imported
    return called, set(re.findall(r"\.([A-Za-z_]\w*)\s*[(),]", text))


def _chapter_modules() -> set:
    """The modules the chapters call by name (``ts.statistics.alpha(...)``, ``ts.experiments.phase.x``)."""
    text = "\n".join(f.read_text() for f in ROOT.glob("book/*.md") if f.name != "api.md")
    out = set()
    for path in re.findall(r"\bts\.((?:[a-z_]+\.)+)[A-Za-z_]\w*\s*\(", text):
        obj = ts
        for part in path.rstrip(".").split("."):
            obj = getattr(obj, part, None)
            if inspect.ismodule(obj):
                out.add(obj.__name__)
    return out


def _boundary(public: dict) -> set:
    """The public callables offered (``__all__``, the chapters' modules) or called from outside the library."""
    called, methods = _outside_calls()
    offered = {id(getattr(ts, n)) for n in ts.__all__}
    for name in _chapter_modules():
        mod = importlib.import_module(name)
        own = [o for k, o in vars(mod).items() if not k.startswith("_") and getattr(o, "__module__", None) == name]
        offered |= {id(o) for o in own + [getattr(mod, k) for k in getattr(mod, "__all__", ())]}
    out = set()
    for name in public:
        mod, _, rest = name.rpartition(".")
        owner = importlib.import_module(mod) if mod in {m.__name__ for m in _modules()} else None
        if owner is not None:  # a function of a module
            at_boundary = id(getattr(owner, rest)) in offered or rest in called
        else:  # a method: its class offered, or the method called
            mod, _, cls = mod.rpartition(".")
            at_boundary = id(getattr(importlib.import_module(mod), cls)) in offered or rest in methods
        if at_boundary and name not in NOT_CALLED:
            out.add(name)
    return out


def _public_callables() -> dict:
    """``{name: function}`` of every public function and method taking a named argument (constraints left out)."""
    out = {}
    var = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    for name, cls, attr, fn in _public():
        if not inspect.isfunction(fn) or (cls is not None and (attr.startswith("_") or issubclass(cls, v.Constraint))):
            continue
        params = [n for n, p in inspect.signature(fn).parameters.items() if p.kind not in var]
        if params[1:] if params[:1] in (["self"], ["cls"]) else params:
            out[name] = fn
    return out


def _allowed(name: str) -> bool:
    return name in UNDECLARED or any(name == m or name.startswith(m + ".") for m in UNDECLARED_MODULES)


# ------------------------------------------------------------------ the values each kind refuses and accepts

SIZE = 2  # the size an example gives a dimension no earlier argument has bound


def _resolve(shape, dims: dict) -> tuple:
    shape = shape if shape is not None else (None,)
    return tuple(dims.get(s, SIZE) if isinstance(s, str) else (SIZE if s is None else s) for s in shape)


def _wrong_shapes(shape, dims: dict) -> list[tuple]:
    """Shapes ``shape`` refuses whatever is bound later: an extra axis, one too many along a fixed or bound axis."""
    if shape is None:
        return []
    good = _resolve(shape, dims)
    out = [good + (1,)]
    for i, s in enumerate(shape):
        if isinstance(s, int) or (isinstance(s, str) and s in dims):
            out.append(good[:i] + (good[i] + 1,) + good[i + 1 :])
    return out


def _int(c, dims):
    out = [("a float", 1.5), ("an integral float", float(example(c, dims))), ("a bool", True), ("a str", "1")]
    out += [("NaN", math.nan), ("a list", [1]), ("2**64", 2**64), ("a float tensor", torch.tensor(1.0))]
    out += [("a meta tensor", torch.tensor(1, device="meta"))]
    out += [("below the minimum", c.min - 1)] if c.min is not None else []
    return out + ([("above the maximum", c.max + 1)] if c.max is not None else [])


def _real(c, dims):
    out = [("a str", "0.5"), ("a bool", True), ("NaN", math.nan), ("a complex", 1j), ("a list", [0.5])]
    out += [("10**400", 10**400), ("a 1-d tensor", torch.tensor([0.5, 0.5]))]
    out += [("a meta tensor", torch.tensor(0.5, device="meta"))]
    out += [("inf", math.inf), ("-inf", -math.inf)] if c.finite else []
    if c.min is not None:
        out += [("below the minimum", c.min - 1.0)] + [("the open minimum", c.min)] * (not c.min_inclusive)
    if c.max is not None:
        out += [("above the maximum", c.max + 1.0)] + [("the open maximum", c.max)] * (not c.max_inclusive)
    return out


def _choice(c, dims):
    out = [("an unknown option", "no-such-option"), ("an int", 1), ("bytes", b"x")]
    first = c.options[0]
    return out + ([("another spelling", first.upper())] if str(first).upper() not in c.options else [])


NUMPY = {"int": np.int64, "real": np.float64, "bool": bool}


def _array(c, dims):
    shape = _resolve(c.shape, dims)
    make = lambda s: np.zeros(s, dtype=NUMPY[c.kind])  # noqa: E731
    out = [("a str", "abc"), ("an array of str", np.full(shape, "a")), ("a ragged list", [[1, 2], [3]])]
    out += [("a complex tensor", torch.zeros(shape, dtype=torch.complex64))]
    out += [("a meta tensor", torch.zeros(shape, device="meta"))]
    out += [(f"shape {s}", make(s)) for s in _wrong_shapes(c.shape, dims)]
    out += [("an empty axis", make((0,) + shape[1:]))] if c.nonempty else []
    out += [("an array of floats", np.full(shape, 0.5))] if c.kind != "real" else []
    out += [("an array of bools", np.ones(shape, dtype=bool))] if c.kind != "bool" else []
    out += [("an array of ints", np.ones(shape, dtype=np.int64))] if c.kind == "bool" else []
    out += [("uint64 above 2**63", np.full(shape, 2**64 - 1, dtype=np.uint64))] if c.kind == "int" else []
    return out + ([("NaN", np.full(shape, np.nan)), ("inf", np.full(shape, np.inf))] if c.finite else [])


def _dtype_of(c) -> torch.dtype:
    if isinstance(c.kind, torch.dtype):
        return c.kind
    return {"float": torch.float64, "int": torch.long, "bool": torch.bool, "real": torch.float64}[c.kind]


def _tensor(c, dims):
    shape, dtype = _resolve(c.shape, dims), _dtype_of(c)
    out = [("a str", "abc"), ("a complex tensor", torch.zeros(shape, dtype=torch.complex64))]
    out += [("a meta tensor", torch.zeros(shape, dtype=dtype, device="meta"))]
    out += [("a sparse tensor", torch.zeros(shape, dtype=dtype).to_sparse())]
    out += [] if c.convert else [("a list", torch.zeros(shape, dtype=dtype).tolist())]
    for other in (torch.float64, torch.long, torch.bool, torch.float16):
        if c._dtype_problem(other, "x") is not None:
            out.append((f"a {other} tensor", torch.zeros(shape, dtype=other)))
    out += [(f"shape {s}", torch.zeros(s, dtype=dtype)) for s in _wrong_shapes(c.shape, dims)]
    if c.finite and dtype.is_floating_point:
        out += [("NaN", torch.full(shape, math.nan, dtype=dtype)), ("inf", torch.full(shape, math.inf, dtype=dtype))]
    return out


def _either(c, dims):
    out = []
    for label, value in (pair for m in c.members for pair in BAD[type(m)](m, dims)):
        try:
            c.check(value, "x", dict(dims))
        except TokenselError:
            out.append((label, value))
    return out


def _numbers(c, dims):
    good = example(c.item, dims)
    out = [("empty", []), ("a str", "1"), ("a bare number", good), ("a 2-D array", np.full((1, 1), good))]
    out += [(f"a list holding {label}", [x]) for label, x in BAD[type(c.item)](c.item, dims)]
    return out + ([("one too many", [good] * (c.length + 1))] if c.length is not None else [])


def _batch(c, dims):
    out = [("a list of sequences", [[0, 1]])]
    if c.labels == "binary":
        out.append(("a multi-class batch", RaggedBatch.from_sequences([[0], [1]], [0, 1], num_classes=2)))
    if c.labels == "classes":
        out.append(("a binary batch", RaggedBatch.from_sequences([[0], [1]], [1, -1])))
    if "S" in dims and "S" in c.binds:
        out.append(("another vocabulary", RaggedBatch.from_sequences([[0]], [1], vocab_size=dims["S"] + 1)))
    return out


def _dtype(c, dims):
    others = [t for t in (torch.float16, torch.int64, torch.complex64, torch.float64) if t not in c.allowed][:3]
    out = [("a str", str(c.allowed[0]).replace("torch.", "")), ("a numpy dtype", np.float32), ("an int", 1)]
    return out + [(str(t), t) for t in others]


def _table_example(c):
    if "count" in c.columns:
        return binned(np.arange(8.0), np.arange(8.0) % 3, bins=2)
    return pd.DataFrame({col: [0] for col in c.columns})


#: the values each kind of constraint refuses, besides any object and None (when None is not allowed)
# fmt: off
BAD = {
    v.Int: _int,
    v.Real: _real,
    v.Bool: lambda c, d: [("an int", 1), ("zero", 0), ("a str", "True"), ("a float", 1.0), ("an array", np.ones(2))],
    v.Choice: _choice,
    v.Text: lambda c, d: [("an empty str", ""), ("blanks", "  "), ("an int", 1), ("bytes", b"x"), ("a list", ["x"])],
    v.FilePath: lambda c, d: [("an int", 1), ("an empty str", ""), ("blanks", "  "), ("bytes", b"x"), ("a list", [])],
    v.Instance: lambda c, d: [(k, x) for k, x in (("a str", "x"), ("an int", 1)) if not isinstance(x, c.types or ())],
    v.Array: _array,
    v.Device: lambda c, d: [("gpu", "gpu"), ("a float", 1.5), ("a bool", True), ("meta", "meta"), ("99", "cuda:99")],
    v.Dtype: _dtype,
    v.Tensor: _tensor,
    v.Either: _either,
    v.Numbers: _numbers,
    v.Subset: lambda c, d: [("a bare option", c.options[0]), ("empty", ()), ("twice", (c.options[0],) * 2),
                            ("unknown", (c.options[0], "?"))],
    Batch: _batch,
    Sequences: lambda c, d: [("a str", "ab"), ("strs", ["ab"]), ("none", []), ("floats", [[0.5]]), ("2-D", [[[0]]])],
    Words: lambda c, d: [("a str", "a good film"), ("a list of ints", [1, 2])],
    Column: lambda c, d: [("a str", "a good film"), ("a dict", {"a": 1})]
        + ([("a None text", ["a", None]), ("an empty text", ["a", " "])] if c.texts else []),
    Source: lambda c, d: [("a list of texts", ["a good film"]), ("an int", 1)],
    Pairs: lambda c, d: [("1-D", np.array([1, 2])), ("floats", [[0.0, 1.5]])]
        + [("three columns", np.zeros((1, 3), dtype=np.int64))]
        + ([] if c.empty else [("no pair", np.zeros((0, 2), dtype=np.int64))]),
    Table: lambda c, d: [("a list", [1.0, 2.0]), ("an array", np.zeros((3, 3)))]
        + ([("no rows", _table_example(c).iloc[:0])] if c.nonempty else []),
}
# fmt: on
#: a value each kind accepts (the others take one from ``_registry``)
# fmt: off
EXAMPLES = {
    v.Int: lambda c, d: c.min if c.min is not None else (1 if c.max is None or c.max >= 1 else c.max),
    v.Real: lambda c, d: ((c.min + c.max) / 2 if c.min is not None and c.max is not None
                          else (c.min + 1.0 if c.min is not None else (0.5 if c.max is None else c.max - 1.0))),
    v.Bool: lambda c, d: True,
    v.Choice: lambda c, d: c.options[0],
    v.Text: lambda c, d: "example",
    v.FilePath: lambda c, d: Path("tokensel-example"),
    v.Instance: lambda c, d: (lambda *args, **kwargs: {}) if c.methods == ("__call__",) else NotImplemented,
    v.Array: lambda c, d: np.zeros(_resolve(c.shape, d), dtype=NUMPY[c.kind]),
    v.Device: lambda c, d: "cpu",
    v.Dtype: lambda c, d: c.allowed[0],
    v.Tensor: lambda c, d: torch.zeros(_resolve(c.shape, d), dtype=_dtype_of(c)),
    v.Either: lambda c, d: example(c.members[0], d),
    v.Numbers: lambda c, d: [example(c.item, d) + i for i in range(c.length or 1)],
    v.Subset: lambda c, d: (c.options[0],),
    Sequences: lambda c, d: [[0, 1], [1]],
    Words: lambda c, d: ["good", "film"],
    Column: lambda c, d: ["a good film", "a bad film"] if c.texts else [1, 0],
    Source: lambda c, d: "reviews.csv",
    Pairs: lambda c, d: np.array([[0, 1]]),
    Table: lambda c, d: _table_example(c),
}
# fmt: on


def invalid(c: v.Constraint, dims: dict) -> list:
    """``(label, value)`` pairs ``c`` refuses, given the dimensions bound by earlier arguments."""
    return [("an object", object())] + ([] if c.allow_none else [("None", None)]) + BAD[type(c)](c, dims)


def example(c: v.Constraint, dims: dict):
    return EXAMPLES[type(c)](c, dims) if type(c) in EXAMPLES else NotImplemented


# ------------------------------------------------------------------ example values


@functools.cache
def _registry() -> list:
    """One example object per library type a declaration names (by ``Instance``, ``Batch`` or ``Duck``)."""
    synthetic = ts.synthetic.assumption1_pairs(3, 1, 3, length=(3, 4), seed=0)
    batch = synthetic.batch
    model = ts.AttentionModel.init(batch.vocab_size, 4, seed=0)
    texts = [f"{w} film number {i}" for i, w in enumerate(["good", "bad"] * 6)]
    reviews = ts.prepare_texts(texts, [i % 2 for i in range(12)], min_df=1, test_fraction=0.25)
    table = ts.shapes.binned(np.arange(8.0), np.arange(8.0) % 3, bins=2)
    run = Run("one_layer", model, pd.DataFrame(), table, table, 0.0, 0.0, 0.0, 8, bins_h=table)
    svm = SVMResult(torch.zeros(4, dtype=torch.float64), 0.0, np.array([[0, 1]]), np.array([0, 1]), "", "", 0, 0, 0, 0)
    # fmt: off
    return [
        batch, synthetic, ClassShapes(torch.zeros(2, 2, dtype=torch.float64), [table, table], [0.0, 0.0]),
        ts.synthetic.independent_tokens_multiclass(6, 6, 3, length=3, seed=0).batch,
        model, ts.MultiClassAttentionModel.init(6, 4, 3, seed=0),
        *(ts.models.variants.make(kind, batch.vocab_size, 4, seed=0) for kind in ts.models.variants.KINDS),
        reviews, reviews.vocab, ts.TrainSettings(steps=2, progress=False),
        ts.experiments.scale("reduced", n_train=4, n_test=4, max_len=4, steps=2),
        run, Fit(reviews, model, pd.DataFrame(), torch.zeros(len(reviews.vocab)), None), svm,
        ts.gradients(model, batch, fused=False), MixPlan(batch), Trajectory("example"), OSError("an example"),
        {"train": run}, [torch.zeros(1)], "an example",
    ]
    # fmt: on


def _example(constraint, dims):
    """The kind's example, else the first object of ``_registry`` it accepts."""
    value = example(constraint, dims)
    if value is not NotImplemented:
        return value
    for obj in _registry():
        try:
            constraint.check(obj, "x", dict(dims))
        except TokenselError:
            continue
        return obj
    return NotImplemented


def _target(owner, attr):
    """What to call: the function, the class, or the method bound to an example instance."""
    if attr is None or isinstance(vars(owner)[attr], (classmethod, staticmethod)):
        return owner if attr is None else getattr(owner, attr)
    instance = next((obj for obj in _registry() if isinstance(obj, owner)), None)
    assert instance is not None, f"no example of {owner.__name__} in _registry to call {attr} on"
    return getattr(instance, attr)


def _examples(decl: v.Declaration) -> tuple[dict, dict]:
    """Valid examples of every declared parameter, in order, and the dimensions bound before each."""
    dims: dict = {}
    values, before = {}, {}
    for name, constraint in decl.params.items():
        before[name] = dict(dims)
        value = _example(constraint, dims)
        assert value is not NotImplemented, f"no example for {name} ({constraint!r}): add one to _registry"
        decl.validate(name, value, dims)  # an example passes its own constraint (and binds its dimensions)
        values[name] = value
    return values, before


# ------------------------------------------------------------------ what must not change


def _digest(objects, folder: Path) -> str:
    h = hashlib.sha256()
    for obj in objects:
        tensors = [obj] if isinstance(obj, torch.Tensor) else []
        tensors += [v for v in vars(obj).values() if isinstance(v, torch.Tensor)] if hasattr(obj, "__dict__") else []
        for t in tensors:
            if t.layout == torch.strided and not t.is_meta and not t.is_complex():
                h.update(t.detach().cpu().contiguous().reshape(-1).to(torch.float64).numpy().tobytes())
    for p in sorted(folder.rglob("*")):
        h.update(str(p.relative_to(folder)).encode() + (p.read_bytes() if p.is_file() else b"/"))
    return h.hexdigest()


# ------------------------------------------------------------------ the tests


def test_the_declarations_cover_the_boundary():
    assert len(DECLARED) >= 150, len(DECLARED)
    for needed in ("train_joint", "train_p", "one_step", "max_margin", "selection", "RaggedBatch", "TrainSettings"):
        assert any(name.endswith(needed) for name in DECLARED), needed


def test_what_is_called_from_outside_is_declared_and_nothing_else():
    """Boundary callables are declared or listed with a reason; internal ones are not; stale entries fail."""
    public = _public_callables()
    boundary = _boundary(public)
    declared = {n for n, fn in public.items() if hasattr(fn, "__tokensel_params__")}
    declared |= {n for n in DECLARED if inspect.isclass(DECLARED[n][0]) and DECLARED[n][1] is None}
    undeclared = sorted(n for n in boundary - declared if not _allowed(n))
    assert not undeclared, "declare these (tokensel.validation.declare) or state why not in UNDECLARED:\n" + (
        "\n".join(undeclared)
    )
    internal = sorted(n for n in DECLARED if n in public and n not in boundary)
    assert not internal, "internal functions declared (nothing outside calls them):\n" + "\n".join(internal)
    stale = sorted(n for n in UNDECLARED if n not in boundary or n in declared)
    assert not stale, f"no longer undeclared boundary functions: {stale}"
    assert not sorted(n for n in NOT_CALLED if n not in public), "NOT_CALLED names a function that is gone"
    for module in UNDECLARED_MODULES:
        importlib.import_module(module.rpartition(".")[0] if module.endswith("path_kind") else module)


@pytest.mark.parametrize("name", sorted(DECLARED), ids=[n.removeprefix("tokensel.") for n in sorted(DECLARED)])
def test_a_declared_function_refuses_bad_values_by_name(name, tmp_path, monkeypatch):
    """Examples and defaults pass; each refused value raises an InvalidArgumentError naming it, changing nothing."""
    monkeypatch.chdir(tmp_path)  # example paths are relative: a body that ran would write here
    owner, attr = DECLARED[name]
    decl = _declaration(owner, attr)
    call = _target(owner, attr)
    values, before = _examples(decl)
    problems = []
    for param, constraint in decl.params.items():
        default = decl.signature.parameters[param].default
        if default is not inspect.Parameter.empty and type(default) is not object:  # not a private sentinel
            try:
                decl.validate(param, default, dict(before[param]))
            except TokenselError as exc:
                problems.append(f"{param}: its default {default!r:.60} fails its constraint: {exc}")
        witnesses = [x for k, x in values.items() if k != param] + [getattr(call, "__self__", None)]
        for label, bad in invalid(constraint, before[param]):
            state = _digest(witnesses, tmp_path)
            try:
                call(**{**values, param: bad})
            except TokenselError as exc:
                if not isinstance(exc, InvalidArgumentError):
                    problems.append(f"{param}, {label}: raised {type(exc).__name__}, not an InvalidArgumentError")
                elif not re.search(rf"(?<![\w.]){re.escape(param)}\b", str(exc)):
                    problems.append(f"{param}, {label}: the message does not name {param}: {exc}")
                elif _digest(witnesses, tmp_path) != state:
                    problems.append(f"{param}, {label}: raised after changing an argument or a file")
            except Exception as exc:  # noqa: BLE001 - the point of the test
                problems.append(f"{param}, {label}: raised {type(exc).__name__}: {str(exc)[:120]}")
            else:
                problems.append(f"{param}, {label}: accepted {bad!r:.60}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


# ------------------------------------------------------------------ the framework itself


def test_declare_checks_before_the_body_and_passes_canonical_values():
    seen = []

    @v.declare(n=v.Int(min=1), x=v.Real(), path=v.FilePath(allow_none=True))
    def f(n, x=0.5, path=None):
        seen.append((n, x, path))
        return n

    assert f(np.int64(3), x=torch.tensor(0.25, requires_grad=True), path="a") == 3
    assert seen == [(3, 0.25, Path("a"))] and type(seen[0][0]) is int and type(seen[0][1]) is float
    for bad in (dict(n=2.0), dict(n=0), dict(n=1, x=float("nan")), dict(n=1, path=3)):
        pytest.raises(InvalidArgumentError, f, **bad)
    assert len(seen) == 1  # the body never ran on a bad argument
    assert f.__tokensel_params__.params["n"].describe() == "an int >= 1"


def test_one_error_family_a_value_error_and_a_type_error_of_it():
    @v.declare(steps=v.Int(min=1))
    def g(steps):
        return steps

    with pytest.raises(ValueError, match="steps must be an int >= 1") as value:
        g(0)
    with pytest.raises(TypeError, match="steps must be an int, got str") as kind:
        g("3")
    assert type(value.value) is InvalidArgumentError and not isinstance(value.value, TypeError)
    assert type(kind.value) is ArgumentTypeError and isinstance(kind.value, InvalidArgumentError)
    assert ts.InvalidBatchError is ts.InvalidParameterError is InvalidArgumentError  # the names readers know


def test_a_declaration_names_parameters_that_exist():
    pytest.raises(TypeError, lambda: v.declare(step=v.Int())(lambda steps: steps)).match("no parameter 'step'")


def test_named_dimensions_tie_arguments_together():
    batch = _registry()[0]
    c = torch.zeros(batch.vocab_size + 1, dtype=torch.float64)
    with pytest.raises(InvalidArgumentError, match=r"c must be a floating-point tensor of shape \(\d+,\) \(one value"):
        ts.statistics.selection(batch, c)


def test_every_kind_of_constraint_lists_what_it_refuses():
    """A new kind of constraint needs its bad values here, or no declared function using it is fuzzed."""
    kinds = {c for c in vars(v).values() if inspect.isclass(c) and issubclass(c, v.Constraint)}
    kinds |= {type(c) for decl in map(lambda d: _declaration(*d), DECLARED.values()) for c in decl.params.values()}
    assert kinds - {v.Constraint, v._Shaped} <= set(BAD), kinds - set(BAD)
