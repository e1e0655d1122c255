"""The report's section on the attacks on updates: label recovery with its interval and the
reconstruction metrics with their spread, from explicit results.json entries (an older
run's entries without them print the numbers alone)."""

from types import SimpleNamespace

import numpy as np
import pytest

from fedaudit.report.fig_update_attacks import section_update_attacks as section_reconstruction

THREAT = {"position": "honest-but-curious server", "knows": ["its update"],
          "does_not_know": ["its samples"]}


def _results(labels_pooled, rec_pooled):
    return {"label_leakage": {"threat_model": THREAT, "pooled": {"bias-count": labels_pooled}},
            "reconstruction": {"threat_model": THREAT, "labels_from": "the guess",
                               "budget": {"iterations": 10, "restarts": 1},
                               "ssim_window": 7, "prior": "the mean image", "seconds": 1.0,
                               "pooled": {"inverting-gradients": rec_pooled}}}


def _cells(html: str) -> list[str]:
    import re

    return re.findall(r"<td[^>]*>(.*?)</td>", html)


def test_the_section_prints_the_interval_and_the_spread():
    html = section_reconstruction(SimpleNamespace(results=_results(
        {"cases": 2, "label_accuracy": 0.875, "count_error": 1.0, "labels": 8,
         "labels_recovered": 7, "label_accuracy_ci": [0.4735, 0.9968],
         "chance_accuracy": 0.25, "verdict": "above chance"},
        {"samples": 16, "psnr": 20.25, "psnr_sd": 3.5, "exact": 0, "ssim": 0.5,
         "ssim_sd": 0.125, "prior_ssim": 0.2, "identifiability": 0.75,
         "label_accuracy": 1.0})))
    cells = _cells(html)
    # a run made before the data-free guess: its chance level and verdict as it wrote them
    assert cells[:8] == ["bias-count", "2", "88%", "88% [47%, 100%]", "25%", "–",
                         "above chance", "1.00"]
    assert cells[8:13] == ["inverting-gradients", "16", "20.2 ± 3.5", "0", "0.500 ± 0.125"]


def test_the_section_prints_the_verdicts_and_what_decided_them():
    detail = {"summary": "leaks (client 0), p = 0.0012 after Holm over 3"}
    html = section_reconstruction(SimpleNamespace(results=_results(
        {"cases": 2, "label_accuracy": 0.875, "count_error": 1.0, "labels": 8,
         "labels_recovered": 7, "label_accuracy_ci": [0.5, 1.0], "chance_accuracy": 0.375,
         "difference": 0.5, "difference_ci": [-0.29, 1.0], "verdict": "leaks",
         "verdict_detail": detail},
        {"samples": 16, "psnr": 20.25, "exact": 0, "ssim": 0.5, "prior_ssim": 0.2,
         "ssim_gain": 0.3, "ssim_gain_ci": [0.1, 0.5], "identifiability": 0.75,
         "label_accuracy": 1.0, "verdict": "inconclusive",
         "verdict_detail": {"summary": "inconclusive (about 9 clients would resolve it, 2 now)"}
         })))
    cells = _cells(html)
    assert cells[4:7] == ["38%", "+50 pts [-29, +100]", detail["summary"]]
    assert cells[8:] == ["inverting-gradients", "16", "20.2", "0", "0.500", "0.200",
                         "+0.300 [+0.100, +0.500]", "75%", "100%",
                         "inconclusive (about 9 clients would resolve it, 2 now)"]


def test_an_older_runs_entries_print_the_numbers_alone():
    html = section_reconstruction(SimpleNamespace(results=_results(
        {"cases": 2, "label_accuracy": 0.875, "count_error": 1.0},
        {"samples": 16, "psnr": 20.25, "exact": 0, "ssim": 0.5, "prior_ssim": 0.2,
         "identifiability": 0.75, "label_accuracy": 1.0})))
    cells = _cells(html)
    assert cells[:8] == ["bias-count", "2", "88%", "–", "–", "–", "–", "1.00"]
    assert cells[8:13] == ["inverting-gradients", "16", "20.2", "0", "0.500"]


def _reconstruction_rows(rounds: list[int], client: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    k = len(rounds) * n
    return {"image": rng.random((k, 1, 4, 4), dtype=np.float32),
            "true_image": rng.random((k, 1, 4, 4), dtype=np.float32),
            "client": np.full(k, client), "round": np.repeat(rounds, n),
            "method": np.full(k, "inverting-gradients"), "psnr": rng.uniform(5, 30, k),
            "ssim": rng.uniform(0, 1, k)}


def test_the_aggregates_reconstructions_get_pictures_of_their_own(tmp_path):
    """aggregate-reconstructions.npz (reconstruction.on lists aggregate): one picture pair
    per attacked round, labelled by the round; a run without the file says why."""
    import matplotlib

    matplotlib.use("Agg")
    from fedaudit.report.fig_reconstruction import fig_aggregate_pictures
    from fedaudit.report.registry import Absent
    from fedaudit.rundir.reading import RunData

    run = RunData(tmp_path, {}, [], {}, None)
    with pytest.raises(Absent, match="reconstruction.on does not list 'aggregate'"):
        fig_aggregate_pictures(run)
    np.savez(tmp_path / "aggregate-reconstructions.npz",
             **_reconstruction_rows([1, 10, 20], client=-1, n=16))
    fig = fig_aggregate_pictures(RunData(tmp_path, {}, [], {}, None))
    labels = [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()]
    # the three rounds side by side (the page's width): their true rows, then rebuilt; the
    # one attack is the figure's title
    assert labels == [f"round {r}: true" for r in (1, 10, 20)] + ["rebuilt"] * 3
    assert fig._suptitle.get_text() == "inverting-gradients"


def test_the_malicious_server_s_read_back_is_drawn(tmp_path):
    """imprint.npz with the matched true images: the read-back's best, median and worst
    under their originals; an imprint.npz written before it kept them says to rerun."""
    import matplotlib

    matplotlib.use("Agg")
    from fedaudit.report.fig_reconstruction import fig_imprint_pictures
    from fedaudit.report.registry import Absent
    from fedaudit.rundir.reading import RunData

    with pytest.raises(Absent, match="imprint.enabled = false"):
        fig_imprint_pictures(RunData(tmp_path, {}, [], {}, None))
    rows = _reconstruction_rows([1], client=-1, n=5)
    old = {k: rows[k] for k in ("image", "psnr", "ssim")}
    np.savez(tmp_path / "imprint.npz", bin=np.arange(5), true_id=np.arange(5), **old)
    with pytest.raises(Absent, match="rerun the scenario"):
        fig_imprint_pictures(RunData(tmp_path, {}, [], {}, None))
    np.savez(tmp_path / "imprint.npz", bin=np.arange(5), true_id=np.arange(5),
             true_image=rows["true_image"], round=rows["round"], **old)
    fig = fig_imprint_pictures(RunData(tmp_path, {}, [], {}, None))
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()] == [
        "round 1: true", "rebuilt"]
    xlabels = [ax.get_xlabel() for ax in fig.axes if ax.get_xlabel()]
    order = np.sort(rows["psnr"])[::-1]  # best, median, worst
    assert xlabels == [f"{v:.1f} dB" for v in (order[0], order[2], order[4])]


def test_the_leakage_grid_writes_each_cell_s_mean_ssim(tmp_path):
    """The per-client x round picture: each attacked cell carries its mean SSIM (the
    trend readable without the colour bar); a cell not attacked stays blank."""
    import matplotlib

    matplotlib.use("Agg")
    from fedaudit.report.fig_reconstruction import fig_leakage
    from fedaudit.rundir.reading import RunData

    a, b = _reconstruction_rows([1, 10], client=0, n=4), _reconstruction_rows([1], client=3,
                                                                              n=2)
    rows = {k: np.concatenate([a[k], b[k]]) for k in a}
    np.savez(tmp_path / "reconstructions.npz", **rows)
    fig = fig_leakage(RunData(tmp_path, {}, [], {}, None))
    want = [rows["ssim"][(rows["client"] == c) & (rows["round"] == r)].mean()
            for c, r in ((0, 1), (0, 10), (3, 1))]
    assert [t.get_text() for t in fig.axes[0].texts] == [f"{v:.2f}" for v in want]


def test_clients_of_one_sample_fill_a_row_and_two_attacks_name_each_group(tmp_path):
    """Each client one sample (batch 1): up to 9 groups of one picture side by side, not
    3 groups spread over 9 columns; with two attacks each group's label names its attack."""
    import matplotlib

    matplotlib.use("Agg")
    from fedaudit.report.fig_reconstruction import fig_pictures
    from fedaudit.rundir.reading import RunData

    parts = [_reconstruction_rows([1], client=c, n=1) for c in range(8)]
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    np.savez(tmp_path / "reconstructions.npz", **rows)
    fig = fig_pictures(RunData(tmp_path, {}, [], {}, None))
    grid = fig.axes[0].get_subplotspec().get_gridspec()
    assert (grid.nrows, grid.ncols) == (2, 8 * 2 - 1)  # 8 pictures, 7 gap columns
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()][:2] == [
        "client 0: true", "client 1: true"]
    rows["method"] = np.where(rows["client"] % 2 == 0, "dlg", "inverting-gradients")
    np.savez(tmp_path / "reconstructions.npz", **rows)
    fig = fig_pictures(RunData(tmp_path, {}, [], {}, None))
    assert fig._suptitle is None
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()][0] == "dlg\nclient 0: true"
