"""How a scenario key is declared once, and the views derived from the declarations.

A scenario table is a frozen dataclass (:mod:`fedaudit.scenario.tables`); each of its keys
is one field declared with :func:`key`: the annotation is the key's type, :func:`key`
gives its default, help and constraints (the keywords of
:func:`fedaudit.options.option`).  A field whose type is another such dataclass is a
sub-table (``FederationConfig.client_resources`` is ``[federation.client_resources]``).
Three markers leave room for what plug-ins declare at registration:

* :func:`plugin_keys` -- the table's other keys are the union of the options the
  registered entries of a kind declare (``[data]``: the datasets', ``[model]``: the
  models', ``[defense]``: the defenses'); they are read as attributes of the table
  (:class:`PluginKeys`: ``scenario.model.layers``);
* :func:`entry_tables` -- one sub-table ``[<table>.<name>]`` per registered entry that
  declares options (``[attack.resmia]``);
* :func:`declared_tables` -- the tables that the registered entries of a kind declare,
  named as they like (the audit stages').

Derived from the declarations: :func:`table_keys` (a dataclass's keys as
:class:`~fedaudit.options.Field`), :func:`layout` (every table in order; the fixed part of
the schema, which :func:`fedaudit.config.schema` completes from the registries),
:func:`build` (the typed tables from validated sections) and :func:`flatten` (the
sections back, in the order scenario.toml lists them).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from fedaudit.options import Field

__all__ = ["FrozenMapping", "PluginKeys", "PluginTables", "Table", "build", "declared_tables",
           "entry_tables", "flatten", "key", "layout", "plugin_keys", "table_keys"]

_KEY = "fedaudit.key"
_PLUGINS = "fedaudit.plugins"


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _thawed(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def key(default: Any, help: str, **constraints: Any) -> Any:
    """Declare a scenario key as a field of its table's dataclass: its default, help and
    constraints (``min``, ``max``, ``choices``, ``check`` ... as for
    :func:`fedaudit.options.option`).  Its type is the field's annotation: ``int``,
    ``float``, ``str``, ``bool``; ``tuple[T, ...]`` for an array of T (a list in TOML, a
    tuple in the typed table); a union for several (``int | float``; in
    ``str | tuple[int, ...]`` the key's ``check`` vets the items)."""
    return dataclasses.field(default=_frozen(default),
                             metadata={_KEY: (default, help, constraints)})


@dataclass(frozen=True)
class _Plugins:
    how: str  # "keys", "entry tables" or "declared tables"
    kind: str  # the registry kind (fedaudit.registry.Registry.kind)


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


class FrozenMapping(Mapping[str, Any]):
    """A read-only mapping that hashes like the frozen tables around it (a table with
    plug-in keys stays usable as a cache key, as ``[data]`` is)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = dict(items or {})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return f"FrozenMapping({self._items!r})"


def plugin_keys(kind: str) -> Any:
    """The ``options`` field of a table whose other keys the registered ``kind`` entries
    declare (their union): key -> value, arrays as tuples like the declared keys'."""
    return dataclasses.field(default_factory=FrozenMapping,
                             metadata={_PLUGINS: _Plugins("keys", kind)})


def entry_tables(kind: str) -> Any:
    """A field holding ``[<table>.<name>]`` for each registered ``kind`` entry that declares
    options (entry name -> its values)."""
    return dataclasses.field(default_factory=_empty,
                             metadata={_PLUGINS: _Plugins("entry tables", kind)})


def declared_tables(kind: str) -> Any:
    """A field holding the tables the registered ``kind`` entries declare (dotted table ->
    its values)."""
    return dataclasses.field(default_factory=_empty,
                             metadata={_PLUGINS: _Plugins("declared tables", kind)})


def _types(annotation: Any) -> tuple[tuple[type, ...], tuple[type, ...] | None]:
    """A key's TOML types and, for an array, its items' types, from its annotation."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        item, dots = typing.get_args(annotation)
        if dots is not Ellipsis:
            raise TypeError(f"{annotation}: an array key is declared as tuple[T, ...]")
        return (list,), (item,)
    if origin in (types.UnionType, typing.Union):
        return tuple(t for a in typing.get_args(annotation) for t in _types(a)[0]), None
    return (annotation,), None


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def table_keys(cls: type) -> Mapping[str, Field]:
    """The keys a table's dataclass declares, in field order, as
    :class:`~fedaudit.options.Field` (type from the annotation)."""
    out = {}
    for f in dataclasses.fields(cls):
        if _KEY in f.metadata:
            default, help, constraints = f.metadata[_KEY]
            kinds, items = _types(_hints(cls)[f.name])
            if items is not None:
                constraints = {"item_types": items, **constraints}
            out[f.name] = Field(types=kinds, default=default, help=help, **constraints)
    return MappingProxyType(out)


def _plugins(f: dataclasses.Field) -> _Plugins | None:
    return f.metadata.get(_PLUGINS)


def _plugin_keys_of(cls: type) -> str | None:
    """The registry kind whose entries' options join the table ``cls`` (or None)."""
    kinds = [p.kind for f in dataclasses.fields(cls) if (p := _plugins(f)) and p.how == "keys"]
    return kinds[0] if kinds else None


def _subtable(cls: type, f: dataclasses.Field) -> type | None:
    t = _hints(cls)[f.name]
    return t if isinstance(t, type) and dataclasses.is_dataclass(t) else None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@dataclass(frozen=True)
class Table:
    """A declared table: its dotted name (as in TOML headers), its dataclass, the keys
    that declares and the registry kind whose entries' options join it (or None)."""
    path: str
    cls: type
    keys: Mapping[str, Field]
    plugin_keys: str | None


@dataclass(frozen=True)
class PluginTables:
    """Where tables of plug-ins go: ``[<prefix>.<name>]`` per registered ``kind`` entry
    with options (:func:`entry_tables`), or, with no prefix, the tables the ``kind``
    entries declare (:func:`declared_tables`)."""
    kind: str
    prefix: str | None


@functools.cache
def layout(root: type) -> tuple[Table | PluginTables, ...]:
    """Every table under the dataclass ``root``, depth first in field order (a table, then
    its sub-tables): the order of the schema and of scenario.toml."""
    out: list[Table | PluginTables] = []

    def walk(cls: type, path: str) -> None:
        keys, extra = table_keys(cls), _plugin_keys_of(cls)
        if keys or extra:
            out.append(Table(path, cls, keys, extra))
        for f in dataclasses.fields(cls):
            sub, p = _subtable(cls, f), _plugins(f)
            if sub is not None:
                walk(sub, _join(path, f.name))
            elif p is not None and p.how != "keys":
                out.append(PluginTables(p.kind, path if p.how == "entry tables" else None))

    walk(root, "")
    return tuple(out)


def build(root: type, sections: Mapping[str, Mapping[str, Any]]) -> Any:
    """The typed ``root`` from validated ``{"dotted.table": {key: value}}`` sections:
    declared and plug-in keys with arrays as tuples, plug-in tables as read-only mappings
    of their values as given (what the plug-in gets)."""
    tables = layout(root)
    declared = {t.path for t in tables if isinstance(t, Table)}
    prefixes = tuple(f"{t.prefix}." for t in tables
                     if isinstance(t, PluginTables) and t.prefix is not None)

    def make(cls: type, path: str) -> Any:
        own = sections.get(path, {})
        keys = table_keys(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            sub, p = _subtable(cls, f), _plugins(f)
            if f.name in keys:
                values[f.name] = _frozen(own[f.name])
            elif sub is not None:
                values[f.name] = make(sub, _join(path, f.name))
            elif p is not None and p.how == "keys":
                values[f.name] = FrozenMapping({k: _frozen(v) for k, v in own.items()
                                                if k not in keys})
            elif p is not None and p.how == "entry tables":
                start = f"{path}."
                values[f.name] = MappingProxyType({
                    sec[len(start):]: MappingProxyType(dict(v)) for sec, v in sections.items()
                    if sec.startswith(start) and sec not in declared})
            elif p is not None:
                values[f.name] = MappingProxyType({
                    sec: MappingProxyType(dict(v)) for sec, v in sections.items()
                    if sec not in declared and not sec.startswith(prefixes)})
        return cls(**values)

    return make(root, "")


def flatten(obj: Any) -> dict[str, dict[str, Any]]:
    """The ``{"dotted.table": {key: value}}`` form of a typed scenario (fresh dicts, arrays
    as lists), tables in :func:`layout` order, each table's declared keys then its
    plug-in keys."""
    out: dict[str, dict[str, Any]] = {}

    def walk(node: Any, path: str) -> None:
        cls = type(node)
        keys = table_keys(cls)
        if keys or _plugin_keys_of(cls):
            out[path] = {}
        for f in dataclasses.fields(cls):
            value, p = getattr(node, f.name), _plugins(f)
            if f.name in keys:
                out[path][f.name] = _thawed(value)
            elif _subtable(cls, f) is not None:
                walk(value, _join(path, f.name))
            elif p is not None and p.how == "keys":
                out[path].update({k: _thawed(v) for k, v in value.items()})
            elif p is not None:
                for name, values in value.items():
                    sec = _join(path, name) if p.how == "entry tables" else name
                    out[sec] = {k: _thawed(v) for k, v in values.items()}

    walk(obj, "")
    return out


class PluginKeys:
    """Mixin of a table with a :func:`plugin_keys` field ``options``: the keys that plug-ins
    declare read as attributes like the declared ones (``scenario.data.seq_len``), and
    :meth:`replace` changes either kind."""

    options: Mapping[str, Any]

    def __getattr__(self, name: str) -> Any:
        # asked only for names that are no field or attribute: the plug-in keys
        options = self.__dict__.get("options", {})
        if name.startswith("__") or name not in options:
            raise AttributeError(f"{type(self).__name__} has no key {name!r}; its keys: "
                                 + ", ".join([*table_keys(type(self)), *options]))
        return options[name]

    def replace(self, **changes: Any) -> Any:
        """A copy with some keys changed, declared or plug-in ones."""
        keys = table_keys(type(self))
        unknown = [k for k in changes if k not in keys and k not in self.options]
        if unknown:
            raise TypeError(f"{type(self).__name__} has no key {unknown[0]!r}")
        extra = {k: v for k, v in changes.items() if k not in keys}
        return dataclasses.replace(  # type: ignore[type-var]
            self, **{k: v for k, v in changes.items() if k in keys},
            options=FrozenMapping({**self.options, **extra}))
