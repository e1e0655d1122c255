"""fedaudit's packages, found rather than listed; everything else about the build is in
pyproject.toml.

Every folder with an ``__init__.py`` under ``fedaudit/``, ``attacks/`` and ``strategies/``
is a package of the wheel, so a new sub-package (``fedaudit/probes/``,
``attacks/membership/``) ships without editing anything here.  ``fedaudit.scenarios`` is
added by name: it lives in ``scenarios/`` (pyproject.toml's ``package-dir`` maps it there and
ships its ``*.toml`` files as package data), which setuptools' discovery cannot name, and
pyproject.toml's ``[tool.setuptools.packages.find]`` cannot add to what it finds
(pypa/setuptools#5145).  A hand-written list forgot ``fedaudit.secrets`` once (issue 38);
``.ci/wheel_check.sh`` installs the wheel and compares its modules with the checkout's.
"""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["fedaudit", "fedaudit.*", "attacks", "attacks.*",
                                      "strategies", "strategies.*"]) + ["fedaudit.scenarios"])
