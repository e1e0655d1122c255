"""The labs' single source (labs/build.py): the committed notebooks equal their build, the
solution and the stub split by markers, every lab has TODOs, checks and a reflection."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.helpers.labs import LABS


def _build_module():
    spec = importlib.util.spec_from_file_location("labs_build", LABS / "build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_committed_notebooks_equal_their_build():
    build = _build_module()
    assert build.sources(), "no lab sources found"
    assert build.main(["--check"]) == 0, "run: python labs/build.py"


def test_build_splits_solution_and_stub(tmp_path):
    build = _build_module()
    src = tmp_path / "lab9_demo.py"
    src.write_text("# %% [markdown]\n# # Title\n#\n# text\n# %%\ndef f(x):\n"
                   "    ### BEGIN SOLUTION\n    return x + 1\n    ### STUB\n"
                   "    return todo('f')\n    ### END SOLUTION\n# %% check\ncheck(f)\n"
                   "# %% [markdown] answer\n# the answer\n")
    student, solution = build.build(src)
    assert [c.cell_type for c in student.cells] == ["markdown", "code", "code"]
    assert [c.cell_type for c in solution.cells] == ["markdown", "code", "code", "markdown"]
    assert student.cells[0].source == "# Title\n\ntext"
    assert solution.cells[1].source == "def f(x):\n    return x + 1"
    assert student.cells[1].source == "def f(x):\n    return todo('f')"
    assert student.cells[1].metadata["tags"] == ["todo"]
    assert solution.cells[1].metadata["tags"] == ["solution"]
    assert student.cells[2].metadata["tags"] == ["check"]
    assert "###" not in student.cells[1].source + solution.cells[1].source
    # ids derive from the position: two builds are identical
    assert build.render(build.build(src)[0]) == build.render(student)


@pytest.mark.parametrize("body, message", [
    ("    ### BEGIN SOLUTION\n    x = 1\n", "not closed"),
    ("    ### STUB\n", "outside a solution block"),
    ("    ### BEGIN SOLUTION\n    ### END SOLUTION\n", "without ### STUB"),
])
def test_build_rejects_broken_markers(tmp_path, body, message):
    build = _build_module()
    src = tmp_path / "lab9_bad.py"
    src.write_text("# %%\ndef f():\n" + body)
    with pytest.raises(SystemExit, match=message):
        build.build(src)


def test_every_lab_has_todos_checks_and_reflection():
    build = _build_module()
    for src in build.sources():
        student, solution = build.build(src)
        tags = [c.metadata.get("tags", []) for c in student.cells]
        assert any("todo" in t for t in tags), src.name
        assert any("check" in t for t in tags), src.name
        # the first TODO comes before the first check (the shipped notebook fails there)
        first_todo = next(i for i, t in enumerate(tags) if "todo" in t)
        first_check = next(i for i, t in enumerate(tags) if "check" in t)
        assert first_todo < first_check, src.name
        assert any("Reflection" in c.source for c in student.cells
                   if c.cell_type == "markdown"), src.name
        assert not any("todo(" in c.source for c in solution.cells if c.cell_type == "code"), \
            f"{src.name}: a solution cell still calls todo()"
        # notebooks use the Python API, never the shell
        code = "\n".join(c.source for c in solution.cells if c.cell_type == "code")
        assert "subprocess" not in code and "\n!" not in "\n" + code, src.name
