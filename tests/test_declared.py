"""Bad input to every declared function, generated from its declaration (:func:`tokensel.validation.declare`).

The library's modules are walked for every function, method and class whose arguments are declared
(``__tokensel_params__``). For each declared parameter and each value its constraint refuses (wrong type,
out of range, NaN or inf, None where None is not allowed, a bool for an int, a meta-device or sparse tensor,
a wrong shape, ...), the function is called with valid example values for its other declared parameters and
must raise the declaration's error naming that parameter, with nothing changed (the example objects'
tensors, the files of the working folder). The example values and the declared defaults must pass their
constraints. A function declared tomorrow is tested here without new test code; only an argument of a new
library type needs an example in ``_registry``."""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import tokensel as ts
from tokensel import validation
from tokensel.errors import InvalidArgumentError, TokenselError

# ------------------------------------------------------------------ the declared functions


def _modules():
    for info in pkgutil.walk_packages(ts.__path__, "tokensel."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def _declared() -> dict:
    """``{name: (owner, attribute)}`` for every declared callable: a function (owner None), a class whose
    fields are declared (attribute None), or a method, classmethod or staticmethod of a class."""
    found = {}
    for mod in _modules():
        for name, obj in vars(mod).items():
            if getattr(obj, "__module__", None) != mod.__name__ or name.startswith("_"):
                continue
            if inspect.isfunction(obj) and hasattr(obj, "__tokensel_params__"):
                found[f"{mod.__name__}.{name}"] = (obj, None)
            elif inspect.isclass(obj):
                if "__tokensel_params__" in vars(obj):
                    found[f"{mod.__name__}.{name}"] = (obj, None)
                for attr, member in vars(obj).items():
                    fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                    if attr != "__init__" and hasattr(fn, "__tokensel_params__"):
                        found[f"{mod.__name__}.{name}.{attr}"] = (obj, attr)
    return found


def _declaration(owner, attr) -> validation.Declaration:
    if attr is None:
        return owner.__tokensel_params__
    member = vars(owner)[attr]
    return (member.__func__ if isinstance(member, (classmethod, staticmethod)) else member).__tokensel_params__


DECLARED = _declared()

#: where an undeclared public callable is allowed, and why: whole modules (and packages) ...
UNDECLARED_MODULES = {
    "tokensel_book": "the book's tooling (claims, figures, Sphinx extensions, its commands), not the library's API",
    "tokensel.models.kernels": "numba kernels on arrays that their declared callers have checked and laid out",
    "tokensel.validation": "the declaration machinery itself: the check_* functions are what the constraints call",
    "tokensel.__main__": "the command line: argparse parses its arguments, each command calls declared functions",
    "tokensel.training.precise": "the many-digit steps of implicit_flow(digits=...), on arguments it has checked",
}
#: ... and single callables: the building blocks of a training step, called once per step (or per evaluation)
#: by a declared model or loop on arguments already checked, where a declaration would check them again per step
UNDECLARED = {
    "tokensel.files.command_failed": "the command lines' one-line report of an error they caught",
    "tokensel.files.existing": "the command lines' check of a path argument (argparse gives a string)",
    "tokensel.files.writable": "the command lines' check of an output path (argparse gives a string)",
    "tokensel.files.path_kind": "what is at a path, for the two checks above",
    "tokensel.files.one_line": "an exception in one line, for command_failed",
    "tokensel.models.gradients.gradients_of_checked": "the loop's per-step gradients; declared: gradients",
    "tokensel.models.core.fused_outputs": "the fused forward pass of a declared model (forward, predict)",
    "tokensel.models.mixing.mix": "the variants' per-step mixing; its plan comes from a declared model",
    "tokensel.models.mixing.entry_attention": "the variants' per-step attention weights, as mix",
    "tokensel.models.mixing.MixPlan.matrix": "a sparse matrix of the plan's own pattern, per step",
    "tokensel.models.mixing.MixPlan.matrix_t": "its transpose, per step",
    "tokensel.models.variants.VariantModel.forward_prepared": "the per-step forward of a declared variant",
    "tokensel.models.variants.MLPOutput.head": "the per-step head of a declared variant",
    "tokensel.models.variants.MLPOutput.forward_prepared": "the per-step forward of a declared variant",
    "tokensel.training.loop.Trajectory.append": "the loop's per-evaluation record",
    "tokensel.experiments.phase.write_followed": "writes the follow-ons that a declared phase_runs kept (runs.attrs)",
    "tokensel.training.loop.low_rank_applies": "the Adam loop's per-run test of its own parameter",
    "tokensel.training.loop.low_rank_adam": "the Adam loop's per-step update of its own optimiser's parameter",
}


def _public_callables() -> dict:
    """``{name: function}`` for every public function, and every public method of a public class, defined in
    a module of tokensel that takes a named argument (besides ``self``, ``cls``, ``*args`` and ``**kwargs``,
    which a declaration cannot name: ``TrainSettings.replace(**changes)`` builds a declared class). The
    methods of a constraint (:class:`tokensel.validation.Constraint`) are the declarations' machinery and are
    left out."""
    found = {}
    for mod in _modules():
        for name, obj in vars(mod).items():
            if getattr(obj, "__module__", None) != mod.__name__ or name.startswith("_"):
                continue
            if inspect.isfunction(obj):
                found[f"{mod.__name__}.{name}"] = obj
            elif inspect.isclass(obj) and not issubclass(obj, validation.Constraint):
                for attr, member in vars(obj).items():
                    fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                    if inspect.isfunction(fn) and not attr.startswith("_"):
                        found[f"{mod.__name__}.{name}.{attr}"] = fn
    out = {}
    var = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    for name, fn in found.items():
        params = [
            n for n, p in inspect.signature(fn).parameters.items() if p.kind not in var
        ]  # declare cannot name *a, **k
        if params[:1] in (["self"], ["cls"]):
            params = params[1:]
        if params:
            out[name] = fn
    return out


def _allowed(name: str) -> bool:
    return name in UNDECLARED or any(name == m or name.startswith(m + ".") for m in UNDECLARED_MODULES)


# ------------------------------------------------------------------ example values


@functools.cache
def _registry() -> list:
    """One example object per library type a declaration names (by ``Instance``, ``Batch`` or ``Duck``)."""
    from tokensel.analysis.maxmargin import SVMResult
    from tokensel.experiments.controls import ClassShapes
    from tokensel.experiments.recipes import Fit, Run
    from tokensel.models.mixing import MixPlan
    from tokensel.training.loop import Trajectory
    from tokensel.training.optimiser import FusedAdam

    synthetic = ts.synthetic.assumption1_pairs(3, 1, 3, length=(3, 4), seed=0)
    batch = synthetic.batch
    model = ts.AttentionModel.init(batch.vocab_size, 4, seed=0)
    texts = [f"{w} film number {i}" for i, w in enumerate(["good", "bad"] * 6)]
    reviews = ts.prepare_texts(texts, [i % 2 for i in range(12)], min_df=1, test_fraction=0.25)
    table = ts.shapes.binned(np.arange(8.0), np.arange(8.0) % 3, bins=2)
    run = Run("one_layer", model, pd.DataFrame(), table, table, 0.0, 0.0, 0.0, 8, bins_h=table)
    svm = SVMResult(torch.zeros(4, dtype=torch.float64), 0.0, np.array([[0, 1]]), np.array([0, 1]), "", "", 0, 0, 0, 0)

    class Labelled:  # what stratified_sample needs of a datasets.Dataset
        column_names = ["text", "label"]

        def select(self, rows):
            return self

    return [
        batch,
        synthetic,
        ClassShapes(torch.zeros(2, 2, dtype=torch.float64), [table, table], [0.0, 0.0]),
        ts.synthetic.independent_tokens_multiclass(6, 6, 3, length=3, seed=0).batch,
        model,
        ts.MultiClassAttentionModel.init(6, 4, 3, seed=0),
        *(ts.models.variants.make(kind, batch.vocab_size, 4, seed=0) for kind in ts.models.variants.KINDS),
        reviews,
        reviews.vocab,
        ts.TrainSettings(steps=2, progress=False),
        ts.experiments.scale("reduced", n_train=4, n_test=4, max_len=4, steps=2),
        run,
        Fit(reviews, model, pd.DataFrame(), torch.zeros(len(reviews.vocab)), None),
        svm,
        ts.gradients(model, batch, fused=False),
        MixPlan(batch),
        Trajectory("example"),
        torch.optim.Adam.__new__(torch.optim.Adam),  # only checked, never stepped (a real one imports dynamo)
        FusedAdam([torch.zeros(2)], 1e-3),
        Labelled(),
        OSError("an example"),
        {"train": run},
        [torch.zeros(1)],
        b"an example key",
        "an example",
        dict,
    ]


def _example(constraint, dims):
    """The constraint's own example, else the first object of ``_registry`` it accepts."""
    value = constraint.example(dims)
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


def _examples(decl: validation.Declaration) -> tuple[dict, dict]:
    """Valid example values of every declared parameter, each checked against its constraint in the order
    of the declaration, and the named dimensions bound before each parameter."""
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


def test_the_declarations_cover_the_library():
    assert len(DECLARED) >= 150, len(DECLARED)
    for needed in ("train_joint", "train_p", "one_step", "max_margin", "selection", "RaggedBatch", "TrainSettings"):
        assert any(name.endswith(needed) for name in DECLARED), needed


def test_every_public_function_is_declared_or_has_a_stated_reason():
    """A public function with arguments is declared (so the test below fuzzes it), or named in
    ``UNDECLARED`` / ``UNDECLARED_MODULES`` with its reason; an entry there that is declared now, or gone, is
    stale."""
    public = _public_callables()
    undeclared = sorted(n for n, fn in public.items() if not hasattr(fn, "__tokensel_params__") and not _allowed(n))
    assert not undeclared, "declare these (tokensel.validation.declare) or state why not in UNDECLARED:\n" + (
        "\n".join(undeclared)
    )
    stale = sorted(n for n in UNDECLARED if n not in public or hasattr(public[n], "__tokensel_params__"))
    assert not stale, f"no longer undeclared public functions: {stale}"
    for module in UNDECLARED_MODULES:
        importlib.import_module(module)


@pytest.mark.parametrize("name", sorted(DECLARED), ids=[n.removeprefix("tokensel.") for n in sorted(DECLARED)])
def test_a_declared_function_refuses_bad_values_by_name(name, tmp_path, monkeypatch):
    """The example values and the defaults pass; every value a constraint refuses raises the declared error
    naming its parameter, with nothing changed."""
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
        witnesses = [v for k, v in values.items() if k != param] + [getattr(call, "__self__", None)]
        for label, bad in constraint.invalid(before[param]):
            state = _digest(witnesses, tmp_path)
            try:
                call(**{**values, param: bad})
            except TokenselError as exc:
                if not isinstance(exc, decl.error):
                    problems.append(f"{param}, {label}: raised {type(exc).__name__}, not {decl.error.__name__}")
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

    @validation.declare(n=validation.Int(min=1), x=validation.Real(), path=validation.FilePath(allow_none=True))
    def f(n, x=0.5, path=None):
        seen.append((n, x, path))
        return n

    assert f(np.int64(3), x=torch.tensor(0.25, requires_grad=True), path="a") == 3
    assert seen == [(3, 0.25, Path("a"))] and type(seen[0][0]) is int and type(seen[0][1]) is float
    for bad in (dict(n=2.0), dict(n=0), dict(n=1, x=float("nan")), dict(n=1, path=3)):
        with pytest.raises(InvalidArgumentError):
            f(**bad)
    assert len(seen) == 1  # the body never ran on a bad argument
    assert f.__tokensel_params__.params["n"].describe() == "an int >= 1"


def test_one_error_class_per_declaration_and_its_type_variant():
    @validation.declare(error=ts.InvalidParameterError, steps=validation.Int(min=1))
    def g(steps):
        return steps

    with pytest.raises(ts.InvalidParameterError, match="steps must be an int >= 1"):
        g(0)
    with pytest.raises(ts.InvalidParameterError, match="steps must be an int") as info:
        g("3")
    assert isinstance(info.value, TypeError) and validation.type_error(ts.InvalidParameterError) is type(info.value)


def test_a_declaration_names_parameters_that_exist():
    with pytest.raises(TypeError, match="no parameter 'step'"):
        validation.declare(step=validation.Int())(lambda steps: steps)


def test_named_dimensions_tie_arguments_together():
    batch = _registry()[0]
    c = torch.zeros(batch.vocab_size + 1, dtype=torch.float64)
    with pytest.raises(ts.InvalidBatchError, match=r"c must be a floating-point tensor of shape \(\d+,\) \(one value"):
        ts.statistics.selection(batch, c)
