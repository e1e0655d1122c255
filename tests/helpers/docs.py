"""The code blocks of the README and the guides (the user guide, the scaling guide, the
labs' instructor guide), read with Sybil, and what each shell line of them means to the
suite (tests/docs/, tests/e2e/test_doc_blocks.py).

Every fenced block of a tested document has a language this module knows (``bash``,
``python``, ``bibtex``); every line of a ``bash`` block is one command that
:func:`check_command` validates as fedaudit would before doing any work (the scenario and
every ``--set`` through ``fedaudit validate``'s checks, a matrix's or a sweep's every run
planned and checked), parses with the real argument parser (a command over run directories
a reader makes first), checks against the tool's ``--help`` (``ray start``, Flower's
SuperLink and SuperNodes: machines the suite does not have), or checks against the file it
names (a Makefile target, a script and its flags, the pinned wheels); a line it does not
know fails the suite, so a new kind of command gets a rule here before it reaches the docs.
Python blocks run: those that train (``fedaudit.run``, ``.matrix``, ``.sweep``) in the
end-to-end part; a block under ``<!-- not run: REASON -->`` is skipped with its reason.
"""

from __future__ import annotations

import argparse
import ast
import functools
import itertools
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser

from tests.helpers.paths import ROOT

#: the documents whose blocks the suite checks
GUIDE = ROOT / "docs" / "guide.md"
#: the README, the user guide, the scaling guide and the labs' instructor guide
DOCS = (ROOT / "README.md", GUIDE, ROOT / "docs" / "scaling.md", ROOT / "labs" / "README.md")
#: fenced-block languages the documents may use
LANGUAGES = ("bash", "python", "bibtex")
#: a Python block that trains runs in the end-to-end part
TRAINS = re.compile(r"\bfedaudit\.(run|matrix|sweep)\(")
SHARED = ROOT.parent / "shared"

_FENCE = re.compile(r"^```(\S*)\s*$", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: its document, first line (1-based), language and text."""
    doc: Path
    line: int
    language: str
    source: str
    #: why the suite does not run it (``<!-- not run: REASON -->`` on the line above)
    not_run: str = ""

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def trains(self) -> bool:
        return self.language == "python" and not self.not_run and bool(TRAINS.search(self.source))


def blocks(doc: Path) -> list[Block]:
    """The ``bash`` and ``python`` blocks of ``doc`` as Sybil's Markdown parsers find them,
    and the ``bibtex`` ones, in document order."""
    found: list[Block] = []
    parsers = [CodeBlockParser(language=lang) for lang in ("bash", "bibtex")]
    lines = doc.read_text(encoding="utf-8").splitlines()
    for ex in Sybil(parsers=[*parsers, PythonCodeBlockParser()]).parse(doc):
        lexemes = ex.region.lexemes
        above = next((ln for ln in reversed(lines[:ex.line - 1]) if ln.strip()), "")
        why = re.fullmatch(r"<!-- not run: (.+) -->", above.strip())
        found.append(Block(doc, ex.line, lexemes["arguments"].split()[0], lexemes["source"],
                           why.group(1) if why else ""))
    return found


def fence_languages(doc: Path) -> list[tuple[int, str]]:
    """(line, language) of every opening fence of ``doc`` (an unnamed one as "")."""
    text, out, inside = doc.read_text(encoding="utf-8"), [], False
    for m in _FENCE.finditer(text):
        if not inside:
            out.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
        inside = not inside
    return out


def command_lines(source: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines
    dropped (shlex drops a trailing ``# comment``)."""
    joined = source.replace("\\\n", " ")
    return [ln for ln in joined.splitlines() if shlex.split(ln, comments=True)]


# ---- what one command line means -----------------------------------------------------

@dataclass(frozen=True)
class Checked:
    """How the suite checked a command: ``validated`` (as fedaudit checks before any work;
    on a machine without a GPU with :data:`NO_GPU` added where the scenario asks for one),
    ``parsed`` (the real argument parser accepts it), ``flags`` (the tool's ``--help`` or
    parser declares every flag it names), ``env`` (an environment variable), ``file`` (it
    names a file, target or pin that exists), or ``runs`` (an end-to-end test runs it as
    printed: ``by`` names it)."""
    command: str
    how: str
    by: str = ""


class NeedsShared(Exception):
    """The command names ``../shared``, which this machine lacks."""


def _makefile() -> str:
    return (ROOT / "Makefile").read_text()


def _needs_shared(args: list[str]) -> None:
    if any("../shared" in a for a in args) and not SHARED.is_dir():
        raise NeedsShared(" ".join(args))


def _fedaudit(args: list[str]) -> str:
    """Parse ``fedaudit ARGS`` with the CLI's own parser (a wrong flag is an error there),
    then validate what it would run."""
    from fedaudit.cli import _parser
    from fedaudit.config.preflight import validate_all
    from fedaudit.defense_matrix.commands import plan_of
    from fedaudit.sweep import plan_sweep

    try:
        ns = _parser().parse_args(args)
    except SystemExit as exc:  # the parser printed its one-line error to stderr
        raise AssertionError(f"fedaudit {shlex.join(args)}: the command line is refused "
                             f"(exit {exc.code})") from None
    _needs_shared(args)
    if ns.command not in ("run", "validate", "deploy", "matrix", "sweep") \
            or not getattr(ns, "scenario", None):
        return "parsed"
    sets = [*ns.overrides, *_without_a_gpu(ns.scenario, ns.overrides)]
    if ns.command == "matrix":  # what `fedaudit matrix` checks before its first run
        plan_of(argparse.Namespace(**{**vars(ns), "overrides": sets}))
    elif ns.command == "sweep":
        plan_sweep(ns.scenario, ns.grids, sets)
    else:
        validate_all(ns.scenario, sets)
    return "validated"


#: what a machine without a GPU adds to validate a scenario that asks for one (the
#: resource check is the one check such a machine cannot make for it)
NO_GPU = "federation.client_resources.num_gpus=0"


def _without_a_gpu(scenario: str, sets: list[str]) -> list[str]:
    import torch

    from fedaudit.config import load_scenario

    if torch.cuda.device_count() or not load_scenario(scenario, sets).federation \
            .client_resources.num_gpus:
        return []
    return [NO_GPU]


def _script_flags(path: Path) -> set[str]:
    """The ``--flags`` a script's argparse declares (its ``add_argument`` calls)."""
    flags: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args
                      if isinstance(a, ast.Constant) and str(a.value).startswith("-")}
    return flags


def _script(args: list[str]) -> str:
    path = ROOT / args[0]
    assert path.is_file(), f"{args[0]}: no such file in the checkout"
    if path.suffix == ".py":
        declared = _script_flags(path)
        for a in args[1:]:
            flag = a.split("=", 1)[0]
            if flag.startswith("--"):
                assert flag in declared, f"{args[0]} has no option {flag} ({sorted(declared)})"
    return "file"


def _pip(args: list[str]) -> str:
    assert args[:1] == ["install"], f"pip {shlex.join(args)}: only pip install is documented"
    pins = set(re.search(r"^TORCH := (.+)$", _makefile(), re.M).group(1).split())
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for a in args[1:]:
        if a in (".", "-e", "-q"):
            continue
        m = re.fullmatch(r"\.\[([\w,-]+)\]", a)
        if m:
            missing = set(m.group(1).split(",")) - set(extras)
            assert not missing, f"pip install {a}: pyproject.toml has no extra {missing}"
        elif "==" in a:
            assert a in pins, f"pip install {a}: the Makefile pins {sorted(pins)}"
        else:
            raise AssertionError(f"pip install {a}: not a documented kind of argument")
    return "file"


def _make(args: list[str]) -> str:
    targets = set(re.findall(r"^([\w-]+):", _makefile(), re.M))
    names = [a for a in args if not a.startswith("-") and "=" not in a]
    for t in names:
        assert t in targets, f"make {t}: the Makefile has no such target ({sorted(targets)})"
    if names[:1] == ["run"] and "-n" not in args:  # make run SCENARIO=x ARGS="--set ..."
        var = dict(a.split("=", 1) for a in args if "=" in a)
        return _fedaudit(["run", var.get("SCENARIO", "quickstart"), *shlex.split(var.get("ARGS", ""))])
    return "file"


def _flwr(args: list[str]) -> str:
    """``flwr run . --run-config 'scenario="x" set="a=b;c=d"'``: the run config's scenario and
    overrides validated; tests/e2e/test_flower_deploy.py runs the line as printed."""
    if args[:2] != ["run", "."]:  # flwr federation simulation-config ...
        return _tool_flags("flwr", args)
    _tool_flags("flwr", args, sub=1)
    config = {k: tomllib.loads(f"v = {v}")["v"] for k, v in
              re.findall(r'([\w-]+)=("(?:[^"\\]|\\.)*")', args[args.index("--run-config") + 1])}
    sets = [s for s in config.get("set", "").split(";") if s]
    if any(re.search(r"=[A-Z][A-Z_]*$", v) for v in sets):  # federation.num_clients=M
        return "flags"
    _needs_shared(sets)
    from fedaudit.config.preflight import validate_all
    validate_all(config["scenario"], sets)
    return "runs" if "flwr " + shlex.join(args) in flwr_command_run_by_the_suite() else "validated"


#: the test that runs the guide's ``flwr run .`` line as printed
FLWR_RUN_BY = "tests/e2e/test_flower_deploy.py"


def flwr_command_run_by_the_suite() -> str:
    """The guide's one ``flwr run .`` line that tests/e2e/test_flower_deploy.py runs."""
    cmds = [ln.strip() for ln in GUIDE.read_text().splitlines()
            if ln.strip().startswith("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 flwr run .")]
    assert len(cmds) == 1, "the guide shows one flwr run command in a code block"
    return cmds[0]


def _tool_flags(tool: str, args: list[str], sub: int | None = None) -> str:
    """An external tool's command (``ray start --head``, ``flower-supernode ...``): every
    ``--flag`` of ``args`` is in ``TOOL SUBCOMMAND --help`` (the tool as installed with
    fedaudit), the subcommand being the first ``sub`` words of ``args`` (default: the words
    before the first flag); values are the reader's (addresses, ids)."""
    if sub is None:
        sub = len(list(itertools.takewhile(lambda w: not w.startswith("-"), args)))
    name = " ".join([tool, *args[:sub]])
    helptext = _help(tool, tuple(args[:sub]))
    for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", " ".join(args[sub:])):
        assert flag in helptext, f"{name} has no option {flag}"
    return "flags"


@functools.lru_cache(maxsize=None)  # ray start --help takes a second or two
def _help(tool: str, sub: tuple[str, ...]) -> str:
    """``TOOL SUB --help`` of the tool installed beside this Python, unwrapped."""
    import os
    import subprocess
    import sys

    out = subprocess.run([str(Path(sys.executable).parent / tool), *sub, "--help"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "400"})
    assert out.returncode == 0, f"{tool} {' '.join(sub)} --help failed: {out.stderr[-300:]}"
    return out.stdout


@functools.lru_cache(maxsize=None)  # the count of tests/docs reuses the checks
def check_command(line: str) -> Checked:
    """Check one documented shell command (module docstring); AssertionError saying what is
    wrong, :class:`NeedsShared` where it names an absent ``../shared``."""
    words = shlex.split(line, comments=True)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # FOO=1 cmd ...
        words = words[1:]
    head, args = words[0], words[1:]
    tool = Path(head).name
    if tool == "fedaudit":
        how = _fedaudit(args)
    elif tool == "make":
        how = _make(args)
    elif tool == "pip":
        how = _pip(args)
    elif tool == "flwr":
        how = _flwr(args)
    elif tool == "python" and args[:2] == ["-m", "pytest"]:
        how = "parsed"
    elif tool in ("python", "bash"):
        how = _script(args)
    elif head == "." and args:  # . .venv/bin/activate
        assert args[0] == ".venv/bin/activate", f". {args[0]}: not the project's venv"
        how = "file"
    elif tool in ("ray", "flower-superlink", "flower-supernode"):
        how = _tool_flags(tool, args)
    elif head == "export":  # export FOO=1
        assert all(re.fullmatch(r"[A-Z_]+=\S*", a) for a in args), line
        how = "env"
    elif tool == "jupyter":
        assert args[0] == "notebook" and all((ROOT / a).exists() for a in args[1:]), line
        how = "file"
    else:
        raise AssertionError(f"{line!r}: tests/helpers/docs.py has no rule for {head!r}; "
                             "add one (validate or run it) before documenting it")
    return Checked(line, how, FLWR_RUN_BY if how == "runs" else "")


# ---- the guide's tables --------------------------------------------------------------------

def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of ``text`` (up to the next ``## ``)."""
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def table_names(text: str) -> set[str]:
    """Every backticked name in the first column of the tables in ``text``, its first path
    component (``checkpoints/round-NNNN.pt`` -> ``checkpoints``)."""
    names = set()
    for row in re.findall(r"^\| (.+?) \|", text, re.M):
        for name in re.findall(r"`([^`]+)`", row):
            names.add(name.split("/")[0])
    return names


def documented_run_files() -> set[str]:
    """The run-directory entries of docs/guide.md section 4's table (first components)."""
    return table_names(section(GUIDE.read_text(), "4. What a run leaves"))


def documented_results_keys() -> set[str]:
    """The top-level results.json keys docs/guide.md section 5 lists: the backticked names
    before `` -- `` in each of its bullets."""
    keys = set()
    for bullet in re.findall(r"^- (.+?) -- ", section(GUIDE.read_text(), "5. results.json"),
                             re.M):
        keys |= set(re.findall(r"`([a-z_]+)`", bullet))
    return keys


# ---- commands in the prose -----------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{1,}\b|\.\.\.|\s\[|\|")


def inline_commands(doc: Path) -> list[str]:
    """Every inline code span of ``doc``'s prose that starts with ``fedaudit `` (whitespace
    of a wrapped line folded)."""
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    return [" ".join(m.group(1).split()) for m in re.finditer(r"`(fedaudit [^`]+)`", text)]


def _subparser(words: list[str]):
    """The argparse parser of ``fedaudit WORDS`` (``lab challenge``: the nested one) and the
    words after its name."""
    import argparse

    from fedaudit.cli import _parser

    parser, rest = _parser(), list(words)
    while rest:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or rest[0] not in subs[0].choices:
            break
        parser, rest = subs[0].choices[rest[0]], rest[1:]
    return parser, rest


@functools.lru_cache(maxsize=None)
def check_inline(span: str) -> Checked:
    """A command named in the prose: a synopsis (``fedaudit run SCENARIO [--out DIR]``), a
    bare name (``fedaudit matrix``) or a flag of it (``fedaudit compare --quantized``) has a
    subcommand that exists and flags it declares (``flags``); a complete command is checked as a block's line is (:func:`check_command`)."""
    words = span.split()[1:]
    parser, rest = _subparser(words)
    assert parser.prog != "fedaudit" or not words, f"`{span}`: fedaudit has no subcommand {words[0]!r}"
    if rest and not _PLACEHOLDER.search(span) and not all(w.startswith("--") for w in rest):
        return check_command(span)
    declared = {s for a in parser._actions for s in a.option_strings}
    for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", span):
        assert flag in declared, f"`{span}`: {parser.prog} has no option {flag}"
    return Checked(span, "flags")
