"""What a stage (or a target kind) may write to results.json: the paths it declares in
``writes``, and the check that it wrote nothing else (:func:`check_writes`, run by
:func:`fedaudit.audit.stages.run_stages` around every stage and by the attacks stage
around every target kind's ``record``).

Path syntax: keys joined by ``.``; ``[]`` after a key means every element of the list
there.  A declared path covers everything beneath it:

- ``attacks``: the top-level key ``attacks`` (added, replaced or changed anywhere inside);
- ``references.rmia_a``: the key ``rmia_a`` of the dict at ``references``;
- ``clients[].attacks``: the key ``attacks`` of every element of the list ``clients``
  (the list itself keeps its length and its elements' other keys).

``warnings`` is the run's log of notes: every stage may append to it without declaring
it, none may change or remove an entry.  The comparison is of the results before and after
(a deep copy taken before), so it costs one copy of results.json per stage.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["check_declared", "check_writes", "parse_path", "snapshot", "written_paths"]

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\[\])?")
#: the one path every stage may append to
APPEND_ONLY = "warnings"


def parse_path(path: str) -> tuple[str, ...]:
    """``"clients[].attacks"`` -> ``("clients", "[]", "attacks")``; ``ValueError`` on a
    path outside the syntax (module docstring)."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"a results.json path must be a non-empty string, got {path!r}")
    out: list[str] = []
    for part in path.split("."):
        if not _KEY.fullmatch(part):
            raise ValueError(f"results.json path {path!r}: {part!r} is not a key (letters, "
                             "digits, _ and -) optionally followed by []")
        out += [part[:-2], "[]"] if part.endswith("[]") else [part]
    return tuple(out)


def check_declared(owner: str, writes: Any) -> None:
    """A registration's ``writes``: a tuple of paths in the syntax above; ``TypeError``
    naming ``owner`` (``stage 'x'``, ``target kind 'y'``) otherwise."""
    if isinstance(writes, str):
        raise TypeError(f"{owner}: writes must be a tuple of results.json paths, got the "
                        f"string {writes!r}")
    for path in writes:
        try:
            parse_path(path)
        except ValueError as exc:
            raise TypeError(f"{owner}: writes: {exc}") from None


def _text(path: tuple[str, ...]) -> str:
    return ".".join(path).replace(".[]", "[]")


def snapshot(results: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``results`` to compare with after a stage."""
    return copy.deepcopy(results)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and a != a and b != b:  # NaN
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. arrays: compared by identity only
        return False


def _changes(before: Any, after: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    if before is after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for k in after:
            if k not in before:
                yield (*path, str(k))
            else:
                yield from _changes(before[k], after[k], (*path, str(k)))
        yield from ((*path, str(k)) for k in before if k not in after)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for b, a in zip(before, after):
            yield from _changes(b, a, (*path, "[]"))
    elif not _same(before, after):
        yield path


def _written(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, ...]]:
    out = []
    for p in dict.fromkeys(_changes(before, after, ())):
        if p == (APPEND_ONLY,):
            b, a = before.get(APPEND_ONLY), after.get(APPEND_ONLY)
            if (isinstance(b, list) and isinstance(a, list) and len(a) > len(b)
                    and not list(_changes(b, a[:len(b)], ()))):
                continue  # appended to: allowed
        out.append(p)
    return out


def written_paths(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Every path of ``after`` that differs from ``before`` (added, removed or changed),
    as deep as the two differ, list elements written ``[]``; an append to ``warnings`` is
    left out."""
    return [_text(p) for p in _written(before, after)]


def check_writes(who: str, declared: Iterable[str], before: dict[str, Any],
                 after: dict[str, Any]) -> list[str]:
    """The paths written between ``before`` and ``after`` (:func:`written_paths`); raises
    ``RuntimeError`` naming ``who`` (e.g. "audit stage 'x'") and the first path that no
    declared path covers."""
    allowed = [parse_path(d) for d in declared]
    written = _written(before, after)
    for w in written:
        if not any(w[:len(d)] == d for d in allowed):
            listed = ", ".join(_text(d) for d in allowed) or "nothing"
            raise RuntimeError(
                f"{who} wrote results.json {_text(w)!r}, which its writes do not declare "
                f"(declared: {listed}); add the path to its writes (docs/architecture.md "
                "section 3)")
    return [_text(w) for w in written]
