"""``fedaudit compare`` columns of the attacks on updates: the first reconstruction
method's pooled PSNR / SSIM / SSIM gain / identifiability and the first label attack's
accuracy, read from explicit results.json fragments; absent without those sections."""

from fedaudit.compare import columns
from fedaudit.compare.cells import update_attack_cells

RESULTS = {
    "reconstruction": {"methods": ["inverting-gradients", "dlg"],
                       "pooled": {"inverting-gradients": {"psnr": 12.5, "ssim": 0.25,
                                                          "ssim_gain": 0.05,
                                                          "identifiability": 0.75},
                                  "dlg": {"psnr": 99.0, "ssim": 0.9, "ssim_gain": 0.7,
                                          "identifiability": 1.0}}},
    "label_leakage": {"methods": ["bias-count", "llg"],
                      "pooled": {"bias-count": {"label_accuracy": 0.875},
                                 "llg": {"label_accuracy": 0.5}}},
}


def test_the_first_methods_pooled_numbers():
    assert update_attack_cells(RESULTS) == {"rec_psnr": 12.5, "rec_ssim": 0.25,
                                            "rec_ssim_gain": 0.05,
                                            "rec_identifiability": 0.75,
                                            "label_accuracy": 0.875}


def test_labels_only_and_nothing():
    labels_only = {"label_leakage": RESULTS["label_leakage"]}
    assert update_attack_cells(labels_only) == {"label_accuracy": 0.875}
    assert update_attack_cells({}) == {}
    # a reconstruction whose every sample was exact has no finite PSNR: an empty cell
    exact = {"reconstruction": {"methods": ["dlg"], "pooled": {"dlg": {"psnr": None,
                                                                      "ssim": 1.0}}}}
    assert update_attack_cells(exact)["rec_psnr"] is None


def test_the_columns_come_after_the_membership_ones():
    row = {"run": "a", "scenario": "s", "defense": "none", "epsilon": None,
           "release": "global", "status": "ok", "test_accuracy": 0.5, "loss_auc": 0.6,
           "loss_tpr_1pct_fpr": 0.01, **update_attack_cells(RESULTS)}
    cols = columns([row])
    # the families in their order: label leakage, then reconstruction
    assert cols[-5:] == ["label_accuracy", "rec_psnr", "rec_ssim", "rec_ssim_gain",
                         "rec_identifiability"]
    assert cols.index("loss_auc") < cols.index("rec_psnr")
