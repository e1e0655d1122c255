"""The installed fedaudit against the checkout it was built from (run by .ci/wheel_check.sh).

    python -I .ci/wheel_modules.py SRC [CHECKOUT ...]    # from a folder outside them

SRC is the folder the wheel was built from.  Checks, and prints one line per failure:
1. the installation is a regular one: fedaudit is not installed editable, no ``sys.path``
   entry lies in SRC or a CHECKOUT, and the packages import from site-packages;
2. the installed packages hold exactly SRC's modules (``fedaudit/``, ``attacks/``,
   ``strategies/``, and ``scenarios/`` as ``fedaudit.scenarios``), listed with pkgutil, and
   exactly its scenario files;
3. every installed module imports.
Exit code 1 on any failure, else 0.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import pkgutil
import sys
import sysconfig
import traceback
from pathlib import Path

#: the checkout's folder of each installed top-level package
PACKAGES = {"fedaudit": "fedaudit", "attacks": "attacks", "strategies": "strategies",
            "fedaudit.scenarios": "scenarios"}

#: modules that need an optional extra to import, with the extra.  None today: add one
#: only with a comment saying why it cannot import with the package's own dependencies.
NEEDS_EXTRA: dict[str, str] = {}


def checkout_modules(src: Path) -> set[str]:
    """The modules of SRC's package folders, by the name they are installed under."""
    names = set()
    for package, folder in PACKAGES.items():
        root = src / folder
        for path in root.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.add(".".join((package, *parts)))
    return names


def installed_modules(errors: list[str]) -> set[str]:
    """Every module file under the installed top-level packages, listed with pkgutil without
    importing anything (so that a package failing to import hides none of its modules)."""
    names = set()

    def walk(folder: str, prefix: str) -> None:
        for info in pkgutil.iter_modules([folder], prefix):
            names.add(info.name)
            if info.ispkg:
                walk(os.path.join(folder, info.name.rpartition(".")[2]), info.name + ".")

    for top in ("fedaudit", "attacks", "strategies"):
        spec = importlib.util.find_spec(top)  # a top-level name: imports nothing
        if spec is None or not spec.submodule_search_locations:
            errors.append(f"package {top} is not installed")
            continue
        names.add(top)
        for folder in spec.submodule_search_locations:
            walk(folder, top + ".")
    return names


def regular_install(checkouts: list[Path]) -> list[str]:
    """Why this is not a regular (non-editable) installation with no checkout on the path,
    if so."""
    problems = []
    try:
        direct = importlib.metadata.distribution("fedaudit").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return ["no distribution fedaudit is installed"]
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        problems.append("fedaudit is installed editable (pip install -e): the check needs a "
                        "wheel installed with pip install WHEEL")
    for entry in sys.path:
        if entry and any(Path(entry).resolve().is_relative_to(c) for c in checkouts):
            problems.append(f"a checkout is on sys.path: {entry}")
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for top in ("fedaudit", "attacks", "strategies", "fedaudit.scenarios"):
        try:
            where = Path(importlib.import_module(top).__file__).resolve()
        except Exception:  # noqa: BLE001 -- reported by the import check
            continue
        if not where.is_relative_to(site):
            problems.append(f"{top} imports from {where}, not from {site}")
    return problems


def main(src: Path, checkouts: list[Path]) -> int:
    failures = regular_install([src, *checkouts])
    installed = installed_modules(failures)
    expected = checkout_modules(src)
    missing, extra = sorted(expected - installed), sorted(installed - expected)
    if missing:
        failures.append(f"the wheel lacks {len(missing)} module(s) of the checkout (is each "
                        "package folder discovered by setup.py, with an __init__.py?): "
                        + ", ".join(missing))
    if extra:
        failures.append(f"the wheel has {len(extra)} module(s) the checkout does not: "
                        + ", ".join(extra))

    wanted = {p.stem for p in (src / "scenarios").glob("*.toml")}
    try:
        from fedaudit.config import bundled_scenarios

        shipped = set(bundled_scenarios())
    except Exception:  # noqa: BLE001 -- reported by the import check
        shipped = set()
    if shipped != wanted:
        failures.append("the wheel's scenario files differ from the checkout's scenarios/: "
                        f"missing {sorted(wanted - shipped)}, extra {sorted(shipped - wanted)}")

    imported = 0
    for name in sorted(installed):
        if name in NEEDS_EXTRA:
            continue
        try:
            importlib.import_module(name)
            imported += 1
        except Exception:  # noqa: BLE001 -- every failing module is reported
            failures.append(f"import {name}: "
                            + traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip())
    for line in failures:
        print(f"wheel check: FAIL: {line}", file=sys.stderr)
    print(f"wheel check: {len(installed)} installed modules ({len(expected)} in the checkout), "
          f"{imported} imported, {len(NEEDS_EXTRA)} left to extras, {len(shipped)} scenario "
          f"files ({len(wanted)} in the checkout), from {sysconfig.get_paths()['purelib']}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -I .ci/wheel_modules.py SRC [CHECKOUT ...]")
    sys.exit(main(Path(sys.argv[1]).resolve(), [Path(p).resolve() for p in sys.argv[2:]]))
