"""The identity of a score function: what a run store records to know which pipeline wrote it.

A store must never serve runs of one pipeline to another (two lambdas, two partials of one
function with other arguments, two instances of a class with other settings). So the identity
covers what determines the scores, as far as it can be read:

- an object with ``describe()`` (e.g. :class:`~rdpest.auditing.GaussianMechanismScore`): what
  that method returns (a JSON dict);
- a module-level function or method: its qualified name, a digest of its code (its bytecode,
  constants and the names it uses) and the values of its default arguments, so an edited function
  is a different pipeline;
- a ``functools.partial``: the identity of its function and the values of its arguments;
- a class (e.g. a model class used as a factory): its name, and the code, default arguments,
  properties and constants (numbers, strings, tuples, lists, dicts, arrays; a long one by a
  digest; values of other types left out) of it and its bases (library classes such as
  ``torch.nn.Module`` left out);
- a callable instance: its class's identity and the values of its attributes;
- values: JSON types as they are, numpy arrays by a digest of their bytes, dataclasses, lists and
  dicts element by element, callables by their identity.

A lambda, a function defined inside another function (a closure) or a value of any other type
cannot be identified this way: :func:`score_fn_identity` raises ``ValueError`` and says how to
name the pipeline (``describe()`` or ``Auditor(config=...)``). Globals that a function reads are
not covered: name the pipeline with ``config`` when they matter.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
import types
from numbers import Integral, Real

import numpy as np

from rdpest.utils.io import array_digest, qualified_name

__all__ = ["callable_identity", "score_fn_identity"]

_HOW = (
    "give the score function a describe() method returning a JSON dict of what determines its "
    "scores, or pass Auditor(config={...}) naming the pipeline"
)


class _Unidentifiable(ValueError):
    pass


#: Top-level packages whose classes a class's identity leaves out (their code is the library's).
_LIBRARY_MODULES = frozenset({"builtins", "abc", "typing", "torch", "numpy", "opacus", "sklearn"})


def _code_digest(code: types.CodeType) -> str:
    h = hashlib.sha256()

    def feed(c: types.CodeType) -> None:
        h.update(c.co_code)
        h.update(repr(c.co_names).encode())
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                feed(const)
            else:
                h.update(repr(const).encode())

    feed(code)
    return h.hexdigest()[:16]


def _function_identity(fn: types.FunctionType, what: str) -> dict:
    qualname = getattr(fn, "__qualname__", "")
    if fn.__name__ == "<lambda>" or "<locals>" in qualname:
        kind = "a lambda" if fn.__name__ == "<lambda>" else "a function defined inside another"
        raise _Unidentifiable(
            f"{what} {qualname or fn} is {kind}, whose identity (its code and the "
            f"values it closes over) cannot be established for the run store"
        )
    return {"function": f"{fn.__module__}.{qualname}", **_code_and_defaults(fn)}


def _code_and_defaults(fn: types.FunctionType) -> dict:
    """The digest of a function's code, and its default argument values where it has any."""
    identity = {"code": _code_digest(fn.__code__)}
    # Default argument values determine the scores as much as the code does (their values live
    # on the function, not in its bytecode). Recorded only where present, so the identity of a
    # function without defaults is what it was before they were covered.
    where = f"{fn.__qualname__}'s default arguments"
    if fn.__defaults__:
        identity["defaults"] = _value(list(fn.__defaults__), where)
    if fn.__kwdefaults__:
        identity["kwdefaults"] = _value(dict(fn.__kwdefaults__), where)
    return identity


def _value(value, where: str):
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value) if np.isfinite(float(value)) else repr(float(value))
    if isinstance(value, np.ndarray):
        return {"ndarray": array_digest(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"dataclass": qualified_name(type(value)), "fields": _value(fields, where)}
    if isinstance(value, list | tuple):
        return [_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _Unidentifiable(f"{where} is a dict with non-string keys")
        return {k: _value(v, f"{where}[{k!r}]") for k, v in sorted(value.items())}
    if callable(value):
        return _identity(value, where)
    raise _Unidentifiable(f"{where} is a {type(value).__name__}, which has no stable identity")


def _class_identity(cls: type, where: str) -> dict:
    """A class by its name, and the code, defaults and plain constants of the classes it is made
    of (its own and its bases', those of libraries such as torch left out): a class used as a
    factory (``model=Net``) is another pipeline when its ``__init__`` or ``forward`` changes."""
    if "<locals>" in cls.__qualname__:
        raise _Unidentifiable(
            f"{where} ({cls.__qualname__}) is a class defined inside a function, whose identity "
            "(the values it closes over) cannot be established for the run store"
        )
    identity: dict = {"class": qualified_name(cls)}
    active = _IN_PROGRESS.__dict__.setdefault("classes", set())
    if cls in active:  # already being identified further up: its name stands for it
        return identity
    active.add(cls)
    try:
        return _class_parts(cls, where, identity)
    finally:
        active.discard(cls)


def _class_parts(cls: type, where: str, identity: dict) -> dict:
    """:func:`_class_identity`'s ``identity`` with the code and constants of ``cls``'s own
    (non-library) classes."""
    parts = []  # in the method resolution order (a list: two classes can share a name)
    for base in cls.__mro__:
        module = getattr(base, "__module__", "") or ""
        if module.split(".")[0] in _LIBRARY_MODULES:
            continue
        members = {}
        for name, member in sorted(vars(base).items()):
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            if isinstance(member, types.FunctionType):
                members[name] = _code_and_defaults(member)
            elif isinstance(member, property | functools.cached_property):
                accessors = (
                    (member.fget, member.fset, member.fdel)
                    if isinstance(member, property)
                    else (member.func,)
                )
                members[name] = {
                    "property": [
                        _code_and_defaults(f) if isinstance(f, types.FunctionType) else None
                        for f in accessors
                    ]
                }
            elif not name.startswith("__"):
                recorded = _class_constant(member, f"{where}.{name}")
                if recorded is not _SKIPPED:
                    members[name] = recorded
        parts.append([qualified_name(base), members])
    if parts:
        identity["code"] = parts
    return identity


#: A class constant whose record would be longer than this (JSON characters) is recorded by a
#: digest of that record, so a large table does not bloat the store's config.json.
_LONGEST_CONSTANT = 1000


def _class_constant(value, where: str):
    """A class attribute's value as :func:`_value` records it (tuples, lists, dicts and arrays
    element by element: an edited ``NOISE = (1.0,)`` is another pipeline), a long one by a
    digest; ``_SKIPPED`` for one of a type with no stable identity (a logger, a compiled pattern,
    ``abc``'s bookkeeping), which identities have always left out."""
    try:
        recorded = _value(value, where)
    except Exception:  # unidentifiable, or an object whose describe() needs arguments: left out
        return _SKIPPED
    text = json.dumps(recorded, sort_keys=True)
    if len(text) > _LONGEST_CONSTANT:
        return {"sha256": hashlib.sha256(text.encode()).hexdigest()[:16]}
    return recorded


_SKIPPED = object()
# The classes whose identity is being computed in this thread: a class that refers to itself
# (``Score.DEFAULT = Score()``), or two that refer to each other, are named, not recursed into.
_IN_PROGRESS = threading.local()


def _identity(fn, where: str, what: str = "the callable") -> dict:
    describe = getattr(fn, "describe", None)
    if callable(describe) and not isinstance(fn, type):
        return {"describe": _value(describe(), f"{where}.describe()")}
    if isinstance(fn, functools.partial):
        return {
            "partial": _identity(fn.func, f"{where}.func", what),
            "args": _value(list(fn.args), f"{where}.args"),
            "keywords": _value(dict(fn.keywords), f"{where}.keywords"),
        }
    if isinstance(fn, types.FunctionType):
        return _function_identity(fn, what)
    if isinstance(fn, types.MethodType):
        identity = {"method": fn.__func__.__name__, "of": _value(fn.__self__, f"{where}.__self__")}
        if isinstance(fn.__func__, types.FunctionType):  # its code and defaults, as a function's
            identity.update(_code_and_defaults(fn.__func__))
        return identity
    if isinstance(fn, types.BuiltinFunctionType):
        return {"builtin": f"{getattr(fn, '__module__', None)}.{fn.__qualname__}"}
    if isinstance(fn, type):
        return _class_identity(fn, where)
    call = type(fn).__dict__.get("__call__") or getattr(type(fn), "__call__", None)  # noqa: B004
    state = getattr(fn, "__dict__", None)
    if not isinstance(call, types.FunctionType) or state is None:
        raise _Unidentifiable(f"{where} ({type(fn).__name__}) has no readable identity")
    # The whole class, not only __call__: the methods it calls and the constants it reads decide
    # the scores as much.
    return {
        "instance": _class_identity(type(fn), f"{where} ({type(fn).__qualname__})"),
        "state": _value(dict(state), f"{where} attributes"),
    }


def callable_identity(fn, name: str, what: str, how: str) -> dict:
    """A JSON dict identifying the callable ``fn`` for a run store, or ValueError.

    ``name`` is the argument's name and ``what`` describes it in messages ("model", "the model
    factory"); ``how`` says how to make it identifiable. The identity is
    :func:`score_fn_identity`'s: a ``describe()`` method's dict, else the function's name, code
    digest and defaults (a partial's function and arguments, a callable instance's class and
    attributes).
    """
    try:
        identity = _identity(fn, name, what)
        if "describe" in identity:  # a described pipeline is recorded as it describes itself
            if not isinstance(identity["describe"], dict):
                raise _Unidentifiable(f"{name}.describe() must return a dict")
            return identity["describe"]
        return identity
    except _Unidentifiable as exc:
        raise ValueError(f"cannot identify {what} for the run store ({exc}): {how}") from None


def score_fn_identity(score_fn) -> dict:
    """A JSON dict identifying ``score_fn`` for a run store, or ValueError saying how to name it.

    Examples
    --------
    >>> import functools, math
    >>> a = score_fn_identity(functools.partial(math.pow, 2.0))
    >>> a == score_fn_identity(functools.partial(math.pow, 2.0))
    True
    >>> a == score_fn_identity(functools.partial(math.pow, 3.0))
    False
    >>> score_fn_identity(lambda include_canary, seed: 0.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot identify the score function for the run store (the score function ...
    """
    return callable_identity(score_fn, "score_fn", "the score function", _HOW)
