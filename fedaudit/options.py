"""Typed option declarations: a key's type(s), default, help and constraints.

The scenario schema (:mod:`fedaudit.config`) is made of :class:`Field` declarations: the
keys of :mod:`fedaudit.scenario`'s tables and the options a plug-in declares at
registration (``register_attack(..., options={...})``, ``register_model(...,
options={...})``): one validation path (:func:`check_value`) for both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

from fedaudit.errors import ScenarioError

#: ``Field.unset`` default: every value is passed on
PASS_ALWAYS = object()


@dataclass(frozen=True)
class Field:
    """One scenario key: its type(s), default, and constraints."""

    types: tuple[type, ...]
    default: Any
    help: str
    choices: Callable[[], tuple[Any, ...]] | tuple[Any, ...] | None = None  # callable: lazy
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    item_types: tuple[type, ...] | None = None  # for lists
    item_choices: Callable[[], tuple[str, ...]] | tuple[str, ...] | None = None
    check: Callable[[Any], str | None] | None = None  # returns a message when invalid
    optional: bool = False  # may be absent / empty string meaning "unset"
    # a plug-in option whose value equals ``unset`` is not passed to the plug-in, which
    # then uses its own default (e.g. Res-MIA's steps = 0: floor(log2 H) steps)
    unset: Any = PASS_ALWAYS
    #: earlier spellings of choices, still accepted and replaced by the current one
    aliases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def option(types, default, help, **kw) -> Field:
    """A :class:`Field` (``types`` a type or a tuple of types)."""
    if not isinstance(types, tuple):
        types = (types,)
    return Field(types=types, default=default, help=help, **kw)


def check_options(owner: str, options: Any) -> None:
    """At registration: ``options`` must map names to :class:`Field` (``owner`` names the
    registration in the ``TypeError``, e.g. ``"model 'transformer'"``)."""
    if not isinstance(options, Mapping):
        raise TypeError(f"{owner}: options must be a dict of name -> fedaudit.options.Field")
    bad = [k for k, v in options.items() if not isinstance(v, Field)]
    if bad:
        raise TypeError(f"{owner}: option {bad[0]!r} must be a fedaudit.options.Field (see "
                        "fedaudit.options.option)")


def _type_name(types: tuple[type, ...]) -> str:
    names = {int: "integer", float: "number", str: "string", bool: "boolean",
             list: "array", dict: "table"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if float in types and isinstance(value, int):
        return True
    return isinstance(value, types)


def _boolean_for_a_word(where: str, f: Field, value: bool) -> ScenarioError:
    """A bare ``true`` / ``false`` where a word is due: TOML read it as a boolean."""
    word = str(value).lower()
    choices = f.choices() if callable(f.choices) else f.choices
    hint = f"; write {f.aliases[word]!r}" if word in f.aliases else ""
    allowed = f"; allowed: {', '.join(map(str, choices))}" if choices else ""
    return ScenarioError(f"{where} = {word}: TOML reads a bare {word} as a boolean, and this "
                         f"key takes a string{hint}{allowed}")


def check_value(where: str, f: Field, value: Any) -> Any:
    """Validate one value; return it normalised (ints widened to float where a float is due,
    an alias replaced by the choice it stands for)."""
    if isinstance(value, bool) and str in f.types and bool not in f.types:
        raise _boolean_for_a_word(where, f, value)
    if isinstance(value, str) and value in f.aliases:
        value = f.aliases[value]
    if not _is_type(value, f.types):
        raise ScenarioError(f"{where} = {value!r}: wrong type, expected {_type_name(f.types)}")
    if f.types == (float,) and isinstance(value, int):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(f"{where} = {value!r}: must be a finite number")
    choices = f.choices() if callable(f.choices) else f.choices
    if choices is not None and value not in choices:
        raise ScenarioError(f"{where} = {value!r}: unknown choice; allowed: "
                            + ", ".join(map(str, choices)))
    if f.min is not None and (value < f.min or (f.min_exclusive and value == f.min)):
        op = ">" if f.min_exclusive else ">="
        bound = f" and <= {f.max:g}" if f.max is not None else ""
        raise ScenarioError(f"{where} = {value!r}: out of range, must be {op} {f.min:g}{bound}")
    if f.max is not None and value > f.max:
        raise ScenarioError(f"{where} = {value!r}: out of range, must be <= {f.max:g}")
    if isinstance(value, list):
        for item in value:
            if f.item_types and not _is_type(item, f.item_types):
                raise ScenarioError(f"{where} = {value!r}: items must be "
                                    f"{_type_name(f.item_types)}")
        if f.item_choices is not None:
            allowed = f.item_choices() if callable(f.item_choices) else f.item_choices
            bad = [v for v in value if v not in allowed]
            if bad:
                raise ScenarioError(f"{where} = {value!r}: unknown choice {bad[0]!r}; "
                                    "allowed: " + ", ".join(allowed))
            if len(set(value)) != len(value):
                raise ScenarioError(f"{where} = {value!r}: lists an entry twice")
    if f.check is not None:
        msg = f.check(value)
        if msg:
            raise ScenarioError(f"{where} = {value!r}: {msg}")
    return value


