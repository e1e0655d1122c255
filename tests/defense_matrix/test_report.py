"""The matrix report from explicit matrix.json documents: cells coloured by their verdict,
the frontier's points, links to the runs' own reports."""

from __future__ import annotations

from fedaudit.defense_matrix.report import (cell_class, cell_verdict_text, frontier_points,
                                            render_matrix_report)


def _cell(figure=None, verdict=None, status="measured", interval=None):
    return {"status": status, "figure": figure, "text": f"fig {figure}", "why": "because",
            "interval": interval, "verdict": verdict, "chance": None}


def test_cells_are_coloured_by_what_they_say_not_by_their_value():
    assert cell_class(_cell(0.51, "leaks")) == "leak"
    assert cell_class(_cell(0.2, "leaks (inverted score)")) == "leak"  # the score, flipped
    assert cell_class(_cell(0.52, "no leak beyond delta")) == "safe"
    assert cell_class(_cell(0.9, "inconclusive")) == "inc"  # never painted safe
    # a matrix made before the four outcomes: above chance was a leak, nothing was safe
    assert cell_class(_cell(0.51, "above chance")) == "leak"
    assert cell_class(_cell(0.9, "not distinguishable from chance")) == "inc"
    assert cell_class(_cell(0.2, "below chance")) == "inc"
    assert cell_class(_cell(30.0)) == "meas"  # a figure with no test
    assert cell_class(_cell(status="not possible")) == "np"
    assert cell_class(_cell(status="not measured")) == "nm"


def _doc():
    cells = lambda auc, psnr: {  # noqa: E731
        "outsider": {"sees": "x", "membership": _cell(auc, "above chance", interval=[0.5, 0.7]),
                     "reconstruction": _cell(status="not possible")},
        "insider": {"sees": "y", "membership": _cell(auc + 0.25, "above chance"),
                    "reconstruction": _cell(psnr)}}
    return {"scenario": "s", "source": "s.toml", "sets": ["federation.rounds=2"],
            "positions": {"outsider": "the released model", "insider": "every round"},
            "families": ["membership", "reconstruction"], "runs_finished": 3, "runs": 4,
            "seconds": 120.0,
            "defenses": [
                {"name": "none", "title": "none", "status": "finished", "test_accuracy": 0.8,
                 "epsilon": None, "cells": cells(0.6, 20.0),
                 "runs": {"main": {"status": "finished", "dir": "runs/none--main/s-1",
                                   "seconds": 60.0, "error": None}}},
                {"name": "dp-sgd", "title": "DP-SGD", "status": "finished",
                 "test_accuracy": 0.6, "epsilon": 3.2, "cells": cells(0.52, 12.0),
                 "runs": {"main": {"status": "finished", "dir": "runs/dp-sgd--main/s-1",
                                   "seconds": 60.0, "error": None}}},
                {"name": "sparsify", "title": "sparsify", "status": "failed",
                 "runs": {"main": {"status": "failed", "dir": None, "seconds": 1.0,
                                   "error": "RuntimeError: boom"}}}]}


def test_a_cell_says_what_decided_its_verdict_or_what_would_resolve_it(tmp_path):
    leak = {**_cell(0.9, "leaks"),
            "detail": {"summary": "leaks (client 0), p = 0.003 after Holm over 13"}}
    assert cell_verdict_text(leak) == "leaks (client 0), p = 0.003 after Holm over 13"
    assert cell_verdict_text(_cell(0.5, "not distinguishable from chance")) == "inconclusive"
    doc = _doc()
    doc["defenses"][0]["cells"]["outsider"]["membership"] = leak
    page = render_matrix_report(doc, tmp_path)
    assert '<td class="cell leak"' in page and "after Holm over 13</small>" in page
    assert "inconclusive: neither" in page  # the legend names the amber cells


def test_the_frontier_takes_each_defense_s_strongest_position():
    pts = frontier_points(_doc(), "membership")
    assert [(p["defense"], p["accuracy"], p["figure"], p["position"]) for p in pts] == [
        ("none", 0.8, 0.85, "insider"), ("DP-SGD", 0.6, 0.77, "insider")]
    assert [p["figure"] for p in frontier_points(_doc(), "reconstruction")] == [20.0, 12.0]
    with_chance = {**_doc()["defenses"][0], "cells": {"insider": {"membership": {
        **_cell(0.7, "above chance"), "chance": 0.5}}}}
    (point,) = frontier_points({"defenses": [with_chance]}, "membership")
    assert point["chance"] == 0.5  # drawn beside the point
    assert frontier_points(_doc(), "label leakage") == []  # the failed defense: no point
    # the malicious server's reconstruction figure is the imprint's share read back, not a
    # PSNR: a defense whose only measured reconstruction is the imprint's gets no point
    imprint = {**_doc()["defenses"][0], "cells": {
        "insider": {"reconstruction": _cell(status="not measured")},
        "malicious server": {"reconstruction": _cell(0.02),
                             "membership": _cell(0.9, "above chance")}}}
    assert frontier_points({"defenses": [imprint]}, "reconstruction") == []
    assert frontier_points({"defenses": [imprint]}, "membership") == []


def test_the_report_links_the_runs_and_shows_every_defense(tmp_path):
    run = tmp_path / "runs" / "none--main" / "s-1"
    run.mkdir(parents=True)
    (run / "report.html").write_text("<html></html>")
    page = render_matrix_report(_doc(), tmp_path)
    assert '<a href="runs/none--main/s-1/report.html">' in page
    assert "runs/dp-sgd--main/s-1" in page and 'href="runs/dp-sgd' not in page  # no report
    assert 'class="cell leak"' in page and 'class="cell np"' in page
    assert "RuntimeError: boom" in page and "ε 3.2" in page
    assert "3 of 4 runs finished, 2.0 min of runs" in page
    assert page.count("data:image/png;base64,") == 1  # the frontier
    assert "<script" not in page
