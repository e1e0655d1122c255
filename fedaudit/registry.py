"""One registry type for every plug-in point: models, datasets, quantizers, attacks, GNQ
kernels (like Opacus' ``grad_sample`` table: one small function per entry, registered by a
decorator next to its code).

A :class:`Registry` maps a key (a name, or a module type for GNQ kernels) to an object
plus free-form metadata given at registration (``bits=4``, ``label="LOSS"``,
``options={...}``).  The scenario schema reads its choices and each plug-in's options from
the registrations (:mod:`fedaudit.config`), so adding an attack, quantizer, dataset or
model is one file -- or one notebook cell -- and nothing else::

    from attacks import register_attack

    @register_attack("my-attack", label="mine")
    def my_attack(oracle, x, y):
        return -oracle.predict_proba(x).max(axis=1)

Rules: a key registered twice by different code is an error (``replace=True`` overrides
deliberately); registering the same function again (same module and qualified name, as a
module reload does) replaces it.  A lookup of an unknown key raises :class:`RegistryError`
listing what is allowed.  A *family* resolves keys by pattern (``ternary-sparse90``).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

K = TypeVar("K")
T = TypeVar("T")

__all__ = ["Registry", "RegistryError", "Entry", "import_submodules", "instance_registrar",
           "loaded_registries", "registered", "registry_of"]


class RegistryError(ValueError, LookupError):
    """An unknown key (the message lists the allowed ones) or a conflicting registration."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    key: Any
    obj: T
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Family:
    pattern: re.Pattern[str]
    resolve: Callable[[re.Match[str]], Entry]
    describe: str


def _origin(obj: Any) -> tuple[Any, Any]:
    """Where a registration's code comes from: a function or class itself, the ``fn`` of a
    spec that wraps one, else the class of an instance (a registered defense, stage or
    target kind)."""
    code = getattr(obj, "fn", obj)
    if not hasattr(code, "__qualname__"):
        code = type(code)
    return getattr(code, "__module__", None), getattr(code, "__qualname__", None)


#: every registry by the kind it holds (``Registry.kind``), recorded as each is created: how
#: a scenario key names its choices (:func:`registered`) without importing the package that
#: defines the registry
_BY_KIND: dict[str, "Registry"] = {}


def _key_text(key: Any) -> str:
    return key.__name__ if isinstance(key, type) else str(key)


class Registry(Mapping[K, T]):
    """A named table ``key -> object`` with metadata; a read-only ``Mapping`` to its users.

    Args:
        kind: what it holds, for messages ("attack", "quantizer" ...).
        name_pattern: a regex that string keys must match (None: any key).
        check: ``check(key, obj, meta)`` run before registering; raises on a bad entry.
    """

    def __init__(self, kind: str, *, name_pattern: str | None = None,
                 check: Callable[[Any, Any, dict], None] | None = None) -> None:
        self.kind = kind
        self._pattern = re.compile(name_pattern) if name_pattern else None
        self._check = check
        self._entries: dict[K, Entry[T]] = {}
        self._builtin: dict[K, Entry[T]] = {}
        self._families: list[_Family] = []
        #: the module that created the registry (found as ``collections.namedtuple`` finds
        #: its caller's): another process imports it to find the registry by its kind
        #: (:mod:`fedaudit.simulation.plugins`)
        self.module: str = sys._getframe(1).f_globals.get("__name__", "__main__")
        _BY_KIND[kind] = self

    # ---- registering --------------------------------------------------------------
    def register(self, key: K, obj: T | None = None, /, *, replace: bool = False, **meta: Any):
        """Register ``obj`` under ``key`` with ``meta``; without ``obj``, a decorator."""
        if self._pattern is not None and not (isinstance(key, str) and self._pattern.fullmatch(key)):
            raise ValueError(f"{self.kind} name must match {self._pattern.pattern}, got {key!r}")

        def add(o: T) -> T:
            old = self._entries.get(key)
            if old is not None and not replace and _origin(old.obj) != _origin(o):
                raise RegistryError(
                    f"{self.kind} {_key_text(key)!r} is already registered by "
                    f"{'.'.join(str(p) for p in _origin(old.obj))}; pass replace=True to "
                    "override it")
            if self._check is not None:
                self._check(key, o, meta)
            self._entries[key] = Entry(key, o, MappingProxyType(dict(meta)))
            return o

        return add if obj is None else add(obj)

    def unregister(self, key: K) -> None:
        """Remove ``key`` (notebooks and tests that register temporary entries)."""
        self._entries.pop(key, None)

    def mark_builtin(self) -> None:
        """Record the entries registered so far as the package's own; called at the end of
        each module that registers built-in entries."""
        self._builtin.update(self._entries)

    def added(self) -> list[Entry[T]]:
        """The entries registered, or replaced, since :meth:`mark_builtin`: the plug-ins
        that a process importing only fedaudit's packages would not have."""
        return [e for k, e in self._entries.items() if self._builtin.get(k) is not e]

    def add_family(self, pattern: str, resolve: Callable[[re.Match[str]], Entry],
                   describe: str) -> None:
        """Keys matching ``pattern`` (full match) resolve through ``resolve(match)``;
        ``describe`` says which in error messages and the schema's help."""
        self._families.append(_Family(re.compile(pattern), resolve, describe))

    # ---- looking up ---------------------------------------------------------------
    def entry(self, key: K) -> Entry[T]:
        """The registration of ``key`` (a family member is built on the fly)."""
        try:
            return self._entries[key]
        except (KeyError, TypeError):
            pass
        if isinstance(key, str):
            for fam in self._families:
                m = fam.pattern.fullmatch(key)
                if m is not None:
                    return fam.resolve(m)
        raise RegistryError(f"unknown {self.kind} {_key_text(key)!r}; allowed: {self.allowed()}")

    def get(self, key: K, default: Any = ...) -> T:  # type: ignore[override]
        """The object registered under ``key``; :class:`RegistryError` when unknown (or
        ``default`` when one is given, like ``dict.get``)."""
        try:
            return self.entry(key).obj
        except RegistryError:
            if default is not ...:
                return default
            raise

    def meta(self, key: K) -> Mapping[str, Any]:
        return self.entry(key).meta

    def accepts(self, key: Any) -> bool:
        """Whether ``key`` is registered or matches a family."""
        try:
            self.entry(key)
        except RegistryError:
            return False
        return True

    def names(self) -> tuple[str, ...]:
        """The registered keys as text, sorted (families not expanded)."""
        return tuple(sorted(_key_text(k) for k in self._entries))

    def allowed(self) -> str:
        """The allowed keys for messages: the names, then each family's description."""
        return ", ".join([*self.names(), *(f.describe for f in self._families)])

    # ---- Mapping --------------------------------------------------------------------
    def __getitem__(self, key: K) -> T:
        try:
            return self._entries[key].obj
        except (KeyError, TypeError):
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        try:
            return key in self._entries
        except TypeError:
            return False

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"


def import_submodules(package: str, path: Any, first: tuple[str, ...] = ()) -> None:
    """Import every public module of a plug-in folder (``package`` with ``__path__`` =
    ``path``), so that the entries they define register: ``first`` in that order (their
    registration order is meaningful), then the others alphabetically.  Attacks,
    datasets, models, defenses, target kinds and audit stages are discovered this way: a
    new one is a new file in its folder."""
    names = [i.name for i in pkgutil.iter_modules(path) if not i.name.startswith("_")]
    for name in [*first, *sorted(n for n in names if n not in first)]:
        importlib.import_module(f"{package}.{name}")


def instance_registrar(registry: Registry, key_attr: str, doc: str) -> Callable:
    """A class decorator, usable bare or as ``(replace=True)``, that registers an instance
    of the decorated class under its ``key_attr`` attribute (defenses by ``kind``, target
    kinds and stages by ``name``) and returns the class; ``doc`` is its docstring."""
    def register(cls: type | None = None, *, replace: bool = False):
        def add(c: type) -> type:
            registry.register(getattr(c, key_attr), c(), replace=replace)
            return c
        return add if cls is None else add(cls)
    register.__doc__ = doc
    return register


def registry_of(kind: str) -> Registry:
    """The registry holding ``kind`` entries ("dataset", "model", "attack" ...); it exists
    once the package defining it is imported (:func:`fedaudit.config.schema.registries`
    imports them all)."""
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise RegistryError(f"no {kind} registry is loaded yet; import the package that "
                            "defines it (fedaudit.config.schema.registries() loads them "
                            "all)") from None


def loaded_registries() -> tuple[Registry, ...]:
    """Every registry created in this process so far, in creation order."""
    return tuple(_BY_KIND.values())


def _registered_names(kind: str) -> tuple[str, ...]:
    return registry_of(kind).names()


def registered(kind: str) -> Callable[[], tuple[str, ...]]:
    """Lazy choices for a scenario key (``choices=registered("dataset")``): the names
    registered as ``kind`` when the key is checked, so a plug-in registered later is
    allowed and declaring the key imports nothing."""
    return functools.partial(_registered_names, kind)
