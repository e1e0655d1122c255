"""The report's section on the attacks on updates: label recovery with its interval and the
reconstruction metrics with their spread, from explicit results.json entries (an older
run's entries without them print the numbers alone)."""

from types import SimpleNamespace

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
    assert cells[:6] == ["bias-count", "2", "88%", "88% [47%, 100%]", "25% (above chance)",
                         "1.00"]
    assert cells[6:11] == ["inverting-gradients", "16", "20.2 ± 3.5", "0", "0.500 ± 0.125"]


def test_an_older_runs_entries_print_the_numbers_alone():
    html = section_reconstruction(SimpleNamespace(results=_results(
        {"cases": 2, "label_accuracy": 0.875, "count_error": 1.0},
        {"samples": 16, "psnr": 20.25, "exact": 0, "ssim": 0.5, "prior_ssim": 0.2,
         "identifiability": 0.75, "label_accuracy": 1.0})))
    cells = _cells(html)
    assert cells[:6] == ["bias-count", "2", "88%", "–", "–", "1.00"]
    assert cells[6:11] == ["inverting-gradients", "16", "20.2", "0", "0.500"]
