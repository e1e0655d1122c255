"""Scenario files: loading, ``--set`` overrides and validation against the schema
(:mod:`fedaudit.config.schema`), then the cross-key checks (:mod:`fedaudit.config.checks`).

A scenario is a TOML file of tables (``[scenario]``, ``[data]``, ``[federation]`` ...);
anything the schema does not declare is an error.  Errors are :class:`ScenarioError` with a one-line message that
names the file, the key and what is allowed -- the CLI prints it and exits with code 2.

Table names are dotted paths (``audit.gnq``, ``federation.client_resources``), exactly as
they are written in TOML headers, so ``--set audit.gnq.lam=0.1`` and
``--set federation.client_resources.num_cpus=2`` address them directly.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from fedaudit.config.checks import check_cross
from fedaudit.config.schema import DEFAULT_TEXT_ATTACKS, defaults, registries, schema
from fedaudit.errors import ScenarioError
from fedaudit.options import check_value as _check_value
from fedaudit.scenario import Scenario, sections_to_toml, to_toml  # noqa: F401 - re-exported


#: keys that moved (issue 48: label leakage got its own table, the jobs' runtime one for
#: every family): old dotted path -> where it is now
MOVED = {"reconstruction.label_methods": "label_leakage.methods (with [label_leakage] "
                                         "enabled = true)",
         "reconstruction.runtime": "update_attacks.runtime",
         "reconstruction.device": "update_attacks.device"}


def _unknown_key(where: str, path: str, section: str, allowed: str) -> ScenarioError:
    """The error for an unknown key: where it moved to, or what ``section`` allows."""
    if path in MOVED:
        return ScenarioError(f"{where}: {path} moved to {MOVED[path]}")
    return ScenarioError(f"{where}: unknown key {path!r}"
                         + (f"; allowed in [{section}]: {allowed}" if allowed else ""))


def _flatten_sections(raw: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """Map nested TOML tables to {dotted section: {key: value}}; reject unknown names."""
    out: dict[str, dict[str, Any]] = {}
    SCHEMA = schema()

    def walk(prefix: str, table: dict[str, Any]) -> None:
        for key, value in table.items():
            path = f"{prefix}.{key}" if prefix else key
            if path in SCHEMA:
                if not isinstance(value, dict):
                    raise ScenarioError(f"{source}: [{path}] must be a table")
                out.setdefault(path, {})
                walk(path, value)
            elif prefix in SCHEMA:
                out[prefix][key] = value
            elif any(s.startswith(path + ".") for s in SCHEMA) and isinstance(value, dict):
                walk(path, value)
            else:
                if prefix:
                    allowed = ", ".join(SCHEMA[prefix]) if prefix in SCHEMA else ""
                    raise _unknown_key(source, path, prefix, allowed)
                raise ScenarioError(f"{source}: unknown table [{path}]; allowed: "
                                    + ", ".join(SCHEMA))
    walk("", raw)
    return out


def validate(sections: dict[str, dict[str, Any]], source: str = "scenario",
             origins: dict[tuple[str, str], str] | None = None) -> Scenario:
    """Return the resolved scenario (defaults filled in) or raise :class:`ScenarioError`.
    ``origins`` names where a key's value came from when not from ``source`` (e.g. the
    ``--set`` argument), so an error blames the right place."""
    resolved = defaults()
    origins = origins or {}
    SCHEMA = schema()
    for sec, values in sections.items():
        fields = SCHEMA[sec]
        for key, value in values.items():
            where = origins.get((sec, key), source)
            if key not in fields:
                raise _unknown_key(where, f"{sec}.{key}", sec, ", ".join(fields))
            resolved[sec][key] = _check_value(f"{where}: {sec}.{key}", fields[key], value)
    regs = registries()
    if "methods" not in sections.get("attack", {}) and \
            regs.datasets.meta(resolved["data"]["dataset"]).get("kind") == "text":
        resolved["attack"]["methods"] = list(DEFAULT_TEXT_ATTACKS)  # resolved, as dp.level
    dp = resolved["audit.dp"]
    if dp["level"] == "auto":  # resolved, so the clients rebuild the same data
        dp["level"] = regs.defenses.get(resolved["defense"]["kind"]).dp_audit or "auto"
    scenario = Scenario.from_sections(resolved)
    check_cross(scenario, source)
    return scenario


def parse_override(text: str) -> tuple[str, str, Any]:
    """Parse ``section.key=value`` (TOML value syntax; a bare word is taken as a string)."""
    if "=" not in text:
        raise ScenarioError(f"--set {text!r}: expected section.key=value")
    path, raw = text.split("=", 1)
    path = path.strip()
    SCHEMA = schema()
    if "." not in path:
        raise ScenarioError(f"--set {text!r}: expected section.key=value "
                            f"(sections: {', '.join(SCHEMA)})")
    section, key = path.rsplit(".", 1)
    if section not in SCHEMA:
        raise ScenarioError(f"--set {text!r}: unknown table [{section}]; allowed: "
                            + ", ".join(SCHEMA))
    if key not in SCHEMA[section]:
        raise _unknown_key(f"--set {text!r}", path, section, ", ".join(SCHEMA[section]))
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        # convenience: a bare word or path is a string (--set data.partitioner=dirichlet,
        # --set data.path=/tmp/x.npz); anything with quotes, brackets, braces, '=', '#' or
        # spaces is meant as TOML and must parse
        if raw and not re.search(r"[\s\"'\[\]{}=#]", raw):
            value = raw
        else:
            raise ScenarioError(f"--set {text!r}: value is not valid TOML "
                                "(quote strings, e.g. key=\"text\")") from None
    return section, key, value


def bundled_scenarios() -> dict[str, Path]:
    """Scenario files shipped with the package, by name."""
    root = resources.files("fedaudit.scenarios")
    return {p.name[:-5]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml")}


def find_scenario(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ScenarioError(f"{name_or_path}: no such scenario file")
        return path
    bundled = bundled_scenarios()
    if name_or_path in bundled:
        return bundled[name_or_path]
    raise ScenarioError(f"{name_or_path!r}: not a file and not a bundled scenario; bundled: "
                        + ", ".join(sorted(bundled)))


def load_scenario(name_or_path: str, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Load a scenario by bundled name or path, apply ``--set`` overrides, validate."""
    path = find_scenario(name_or_path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read: {exc}") from None
    sections = _flatten_sections(raw, str(path))
    bundled = path.resolve().parent == Path(str(resources.files("fedaudit.scenarios"))).resolve()
    # a user's file names its data relative to itself; a bundled one relative to the
    # current directory (where `data/` would be)
    _absolute_paths(sections, Path.cwd() if bundled else path.resolve().parent)
    resolved = validate(sections, str(path), _apply_overrides(sections, overrides))
    # --set paths and the defaults are relative to the cwd: a run's scenario.toml must
    # mean the same from any directory
    return _absolute_data_paths(resolved, Path.cwd())


def _apply_overrides(sections: dict[str, dict[str, Any]],
                     overrides: list[str] | tuple[str, ...]) -> dict[tuple[str, str], str]:
    """Apply ``--set`` overrides to ``sections``; return where each value came from (for
    :func:`validate`'s messages)."""
    origins: dict[tuple[str, str], str] = {}
    for text in overrides:
        section, key, value = parse_override(text)
        sections.setdefault(section, {})[key] = value
        origins[(section, key)] = f"--set {text}"
    return origins


#: scenario keys holding file or folder paths (stored absolute in a resolved scenario)
PATH_KEYS = (("data", "path"), ("data", "data_dir"))


def _absolute(value: str, base: Path) -> str:
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else base / p)


def _absolute_paths(sections: dict[str, dict[str, Any]], base: Path) -> None:
    """Make the non-empty string paths of :data:`PATH_KEYS` absolute against ``base``
    (``~`` expanded), in place."""
    for sec, key in PATH_KEYS:
        value = sections.get(sec, {}).get(key)
        if isinstance(value, str) and value:
            sections[sec][key] = _absolute(value, base)


def _absolute_data_paths(scenario: Scenario, base: Path) -> Scenario:
    """:func:`_absolute_paths` for a validated scenario (paths from defaults included)."""
    d = scenario.data
    return scenario.replace(data=dataclasses.replace(
        d, path=_absolute(d.path, base) if d.path else "",
        data_dir=_absolute(d.data_dir, base) if d.data_dir else ""))


def scenario_from_dict(raw: dict[str, Any], overrides: list[str] | tuple[str, ...] = (),
                       source: str = "scenario dict") -> Scenario:
    """Validate a scenario given as a dict: nested like the TOML
    (``{"federation": {"rounds": 2}}``) or with dotted table names
    (``{"audit.gnq": {"client": False}}``); relative paths are taken from the cwd."""
    nested: dict[str, Any] = {}
    for sec, values in raw.items():
        node = nested
        for part in str(sec).split("."):
            node = node.setdefault(part, {})
        if not isinstance(values, dict):
            raise ScenarioError(f"{source}: [{sec}] must be a table (a dict)")
        node.update(copy.deepcopy(values))
    sections = _flatten_sections(nested, source)
    resolved = validate(sections, source, _apply_overrides(sections, overrides))
    return _absolute_data_paths(resolved, Path.cwd())


def from_toml(text: str, source: str = "scenario") -> Scenario:
    """Parse and validate a scenario given as TOML text (e.g. a run's scenario.toml)."""
    return validate(_flatten_sections(tomllib.loads(text), source), source)
