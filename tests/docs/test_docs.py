"""The README and the guides (docs/guide.md, docs/scaling.md, labs/README.md) say what the
code does: every shell command of their code blocks checked (tests/helpers/docs.py), every
command named in their prose with its subcommand and flags, every Python block that does
not train run (those that do: tests/e2e/test_doc_blocks.py), every link resolving, the
run-directory table against fedaudit/rundir/layout.py, the results.json key list against
what the audit stages declare they write, the scenario table against the bundled
scenarios, compare's columns against the code, and every figure of the README citing the
validation section that measured it."""

from __future__ import annotations

import collections
import re

import pytest

import fedaudit
from fedaudit.registry import loaded_registries
from tests.helpers.docs import (DOCS, GUIDE, LANGUAGES, NeedsShared, blocks, check_command,
                                check_inline, command_lines, documented_results_keys,
                                fence_languages, inline_commands, section, table_names)
from tests.helpers.paths import ROOT

README = ROOT / "README.md"
VALIDATION = ROOT / "docs" / "validation.md"

SHELL = [(b, ln) for d in DOCS for b in blocks(d) if b.language == "bash"
         for ln in command_lines(b.source)]
INLINE = [(d, c) for d in DOCS for c in inline_commands(d)]
PYTHON = [b for d in DOCS for b in blocks(d) if b.language == "python" and not b.trains]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_fenced_block_has_a_language_the_suite_checks(doc):
    for line, lang in fence_languages(doc):
        assert lang in LANGUAGES, f"{doc.name}:{line}: a ```{lang} block; the suite checks " \
                                  f"only {LANGUAGES} (tests/helpers/docs.py)"


@pytest.mark.parametrize("block,line", SHELL, ids=[f"{b.id}:{ln[:40]}" for b, ln in SHELL])
def test_every_documented_command_is_valid(block, line, monkeypatch):
    monkeypatch.chdir(ROOT)  # the docs' commands run in the checkout (../shared/data)
    try:
        checked = check_command(line)
    except NeedsShared:
        pytest.skip("../shared is absent on this machine")
    assert checked.how in ("validated", "parsed", "flags", "env", "file", "runs")


@pytest.mark.parametrize("doc,span", INLINE, ids=[f"{d.name}:{c[:40]}" for d, c in INLINE])
def test_every_command_named_in_the_prose_exists(doc, span, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        checked = check_inline(span)
    except NeedsShared:
        pytest.skip("../shared is absent on this machine")
    assert checked.how in ("validated", "parsed", "flags")


@pytest.fixture()
def clean_registries():
    """Entries a Python block registers are removed after it (the suite goes on)."""
    before = {id(r): {e.key for e in r.added()} for r in loaded_registries()}
    yield
    for r in loaded_registries():
        for e in r.added():
            if e.key not in before.get(id(r), set()):
                r.unregister(e.key)


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_every_python_block_runs(block, clean_registries, monkeypatch):
    if block.not_run:
        pytest.skip(f"{block.id}: {block.not_run}")
    monkeypatch.chdir(ROOT)
    exec(compile(block.source, f"{block.id}", "exec"), {"__name__": "docs_block"})


def _tally(commands, check) -> dict[str, int]:
    """How many of ``commands`` ``check`` found of each kind (refused: the tests above say
    why)."""
    counts: collections.Counter[str] = collections.Counter()
    for command in commands:
        try:
            counts[check(command).how] += 1
        except NeedsShared:
            counts["skipped (no ../shared)"] += 1
        except Exception:
            counts["refused"] += 1
    return dict(counts)


def test_the_blocks_are_counted(monkeypatch):
    """What the doc tests cover (printed with -s; the issue 60 note quotes it)."""
    monkeypatch.chdir(ROOT)
    kinds = _tally((ln for _, ln in SHELL), check_command)
    prose = _tally((span for _, span in INLINE), check_inline)
    trains = sum(b.trains for d in DOCS for b in blocks(d))
    not_run = sum(bool(b.not_run) for b in PYTHON)
    print(f"\n{len(SHELL)} shell commands in code blocks: {kinds}; {len(INLINE)} named in the "
          f"prose: {prose}; {len(PYTHON) - not_run} Python blocks run here, {trains} in the "
          f"end-to-end part, {not_run} not run (their reason in the document)")
    assert SHELL and PYTHON and trains


# ---- links, contents -------------------------------------------------------------------

_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    for target, _ in _LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        assert (doc.parent / target).exists(), f"{doc.name}: link to {target}: no such file"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_guide_contents_list_every_section_in_order():
    text = GUIDE.read_text()
    heads = re.findall(r"^## (.+)$", text, re.M)
    listed = re.findall(r"^\d+\. \[.+\]\(#([^)]+)\)$", text, re.M)
    assert listed == [_anchor(h) for h in heads]


# ---- the run directory and results.json ---------------------------------------------------

def test_the_run_directory_table_is_the_layout():
    from fedaudit.rundir import layout

    spelled = {v for k, v in vars(layout).items()
               if k.endswith(("_NAME", "_DIR")) and isinstance(v, str)}
    spelled.add(layout.aggregate_file(layout.RECONSTRUCTIONS_NAME))
    documented = table_names(section(GUIDE.read_text(), "4. What a run leaves"))
    assert spelled - documented == set(), "files of layout.py missing from the guide's table"
    extra = {n for n in documented - spelled
             if not re.fullmatch(r"rounds-seed-S\.jsonl|file", n)}
    assert extra == set(), "the guide's table names files layout.py does not spell"


def test_the_results_keys_cover_every_stage_and_target_kind():
    from fedaudit.audit import STAGES
    from fedaudit.audit.writes import parse_path

    declared = {parse_path(p)[0] for s in STAGES.values() for p in s.writes}
    assert declared - documented_results_keys() == set()


# ---- scenarios, compare ------------------------------------------------------------------

def test_the_scenario_table_lists_every_bundled_scenario():
    from fedaudit.config import bundled_scenarios

    text = section(GUIDE.read_text(), "2. Scenarios")
    assert table_names(text) - {"scenario"} == set(bundled_scenarios())


def test_compare_columns_are_described():
    from fedaudit.compare import BASE_COLUMNS
    from fedaudit.compare.cells import POSITION_COLUMNS, UPPER_BOUND_COLUMN, update_attack_columns
    from fedaudit.compare import AUDIT_COLUMNS

    text = section(GUIDE.read_text(), "7. Reports, comparisons, sweeps")
    for col in (*BASE_COLUMNS, *update_attack_columns(), *POSITION_COLUMNS.values(),
                UPPER_BOUND_COLUMN, *AUDIT_COLUMNS, "rqn_mean", "rqn"):
        assert f"`{col}`" in text, f"compare's column {col} is not in the guide"


# ---- numbers -------------------------------------------------------------------------------

_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\s*(?:%|min\b|s\b|minutes|hours|dB)|\b0\.\d{2,}")
_CITES = re.compile(r"docs/validation\.md sections? (\d+)(?: and (\d+))?")


def _validation_sections() -> dict[str, str]:
    text = VALIDATION.read_text()
    parts = re.split(r"^## (\d+)\. ", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_every_cited_validation_section_exists():
    sections = _validation_sections()
    for doc in DOCS:
        for m in _CITES.finditer(doc.read_text()):
            for n in filter(None, m.groups()):
                assert n in sections, f"{doc.name} cites docs/validation.md section {n}"


def test_the_readme_numbers_come_from_the_validation_sections():
    """A measured figure in the README's prose sits in a paragraph that cites the
    validation section where it was measured, and that section holds it: none is copied
    by hand twice without a test."""
    sections = _validation_sections()
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)
    for para in text.split("\n\n"):
        figures = [f for f in _NUMBER.findall(para) if not re.fullmatch(r"(95|10) %", f)
                   and not f.startswith("0.05")]
        if not figures:
            continue
        cited = [n for m in _CITES.finditer(para) for n in m.groups() if n]
        assert cited, f"README: {figures} without the validation section that measured them"
        body = " ".join(sections[n] for n in cited)
        for f in figures:
            assert f in body, f"README: {f!r} is not in docs/validation.md section(s) {cited}"


def test_the_citation_is_the_package_version():
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(rf"^version: {re.escape(fedaudit.__version__)}$", cff, re.M)
    bib = [b for b in blocks(README) if b.language == "bibtex"]
    assert len(bib) == 1 and f"version = {{{fedaudit.__version__}}}" in bib[0].source


# ---- the suite and the architecture as the docs describe them ------------------------------

def test_the_test_folders_are_the_guides_list():
    described = section(GUIDE.read_text(), "13. The test suite")
    folders = {p.name for p in (ROOT / "tests").iterdir()
               if (p / "__init__.py").is_file() and p.name not in ("e2e", "helpers")}
    missing = {f for f in folders if f"`{f}/`" not in described and f"`tests/{f}/`" not in described}
    assert missing == set(), "test folders docs/guide.md section 13 does not list"


def test_ci_runs_the_readmes_test_command():
    readme = [ln for b in blocks(README) if b.language == "bash"
              for ln in command_lines(b.source) if ln.split()[:2] == ["make", "test"]]
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.lstrip().startswith("#")]
    assert readme and ci[-1] == "make test"


def test_the_architecture_names_every_built_in_family():
    from attacks.update_family import families

    text = (ROOT / "docs" / "architecture.md").read_text()
    for fam in families():
        module = type(fam).__module__
        assert module.replace(".", "/") + ".py" in text, f"{module} is not in architecture.md"
