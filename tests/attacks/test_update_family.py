"""The families of attacks on updates (attacks.update_family): what registration refuses,
the tables the schema gets from them, and the built-in families' scoring and reading on
explicit outputs and results.json sections (hand-computed numbers)."""

import numpy as np
import pytest

from attacks.label_leakage import LabelGuess
from attacks.update_family import (FAMILIES, CaseOutput, CaseTruth, Headline, ReportTable,
                                   Scoring, UpdateAttackFamily, enabled_families, families,
                                   register_family)
from fedaudit.config import load_scenario
from fedaudit.config.schema import schema
from fedaudit.options import option
from fedaudit.registry import Registry


def test_the_built_in_families_in_order():
    assert [f.name for f in families()] == ["label_leakage", "reconstruction",
                                            "property_inference"]
    assert [f.title for f in families()] == ["label leakage", "reconstruction",
                                             "property inference"]
    s = load_scenario("reconstruction-digits")
    assert [f.name for f in enabled_families(s)] == ["label_leakage", "reconstruction"]
    assert enabled_families(load_scenario("quickstart")) == []


def test_the_reconstruction_file_is_the_run_directory_s_name_for_it():
    from fedaudit.rundir.layout import RECONSTRUCTIONS_NAME

    assert FAMILIES.get("reconstruction").file == RECONSTRUCTIONS_NAME  # the report reads it


def test_the_schema_has_each_family_s_table_and_the_jobs_table():
    sch = schema()
    assert set(sch["label_leakage"]) == {"enabled", "clients", "rounds", "on", "methods"}
    assert {"labels", "max_samples", "iterations", "seed"} <= set(sch["reconstruction"])
    assert set(sch["update_attacks"]) == {"runtime", "device"}
    assert "share" not in sch["label_leakage"]  # attack options live in their own tables


@pytest.mark.parametrize("attrs, message", [
    ({"attacks": {"a": print}}, "attacks must be a Registry"),
    ({"options": {"rounds": option(int, 1, "clash")}}, "option 'rounds' is a common key"),
])
def test_a_bad_family_is_refused_at_registration(attrs, message):
    cls = type("Bad", (UpdateAttackFamily,), {
        "name": "bad_family", "title": "bad", "attacks": Registry("bad attack"), **attrs})
    with pytest.raises(TypeError, match=message):
        register_family(cls)
    assert "bad_family" not in FAMILIES


def _truth(client, labels):
    y = np.asarray(labels, dtype=np.int64)
    return CaseTruth(client, 1, np.arange(len(y)), np.zeros((len(y), 1, 4, 4)), y)


def test_label_leakage_scores_and_pools_explicit_guesses():
    """Client 0 holds labels {0, 0, 1}, guessed {0, 1, 1}: 2 of 3 right, count error 2;
    client 1 holds {2}, guessed {2}: 1 of 1.  Pooled: mean accuracy (2/3 + 1) / 2, mean
    count error 1, 3 of 4 samples recovered."""
    fam = FAMILIES.get("label_leakage")
    outs = [CaseOutput(0, 1, {"m": LabelGuess(np.array([1, 2, 0]), {})}, {"m": 0.5}),
            CaseOutput(1, 1, {"m": LabelGuess(np.array([0, 0, 1]), {})}, {"m": 0.25})]
    scored = fam.score(outs, Scoring(["m"], [_truth(0, [0, 0, 1]), _truth(1, [2])], 3,
                                     np.zeros((1, 4, 4)), {}))
    cases = scored.section["cases"]
    assert cases[0]["m"] == {"label_accuracy": 2 / 3, "count_error": 2, "seconds": 0.5}
    assert cases[1]["m"]["label_accuracy"] == 1.0 and scored.arrays is None
    pooled = scored.section["pooled"]["m"]
    assert pooled["label_accuracy"] == (2 / 3 + 1) / 2 and pooled["count_error"] == 1.0
    assert (pooled["labels"], pooled["labels_recovered"]) == (4, 3)
    section = {"methods": ["m"], **scored.section}
    assert fam.columns(section) == {"label_accuracy": pooled["label_accuracy"]}
    # the data-free guess (uniform prior over 3 classes): {0, 1, 2} for client 0 (2 of its
    # 3 labels), {0} for client 1 (none): 2 of 4, beside the attack's 3 of 4
    assert pooled["chance_accuracy"] == 0.5 and pooled["chance_recovered"] == 2
    assert pooled["difference"] == 0.25 and pooled["clients"] == 2
    # two clients: t on 1 degree of freedom, the intervals cut to their bounds
    assert pooled["label_accuracy_ci"] == [0.0, 1.0]
    assert pooled["verdict"] == "inconclusive"  # two clients show neither
    detail = pooled["verdict_detail"]
    assert detail["tests"] == 3 and detail["unit"] == "client"  # pooled + 2 clients
    # the cell is the share of the 4 samples' labels recovered, the figure the interval is
    # of (the mean accuracy 0.83 weighs client 1's one sample as much as client 0's three)
    cell = fam.cell(section)
    assert cell.figure == 0.75 and cell.chance == 0.5 and cell.verdict == "inconclusive"
    assert cell.interval == [0.0, 1.0] and cell.detail == detail
    assert cell.text.startswith("label acc 0.75 [0.00, 1.00] (m), data-free guess 0.50")
    older = {"methods": ["m"], "pooled": {"m": {"label_accuracy": 0.5}}}
    assert fam.cell(older) == Headline(0.5, "label acc 0.50 (m)")
    assert fam.console(section).startswith("label leakage from 2 updates: label accuracy m 83%")
    _, tab = fam.report(section)
    assert isinstance(tab, ReportTable)
    assert tab.rows[0][:5] == ["m", "2", "83%", "75% [0%, 100%]", "50%"]


def test_a_family_without_methods_reads_as_nothing():
    for fam in families():
        assert fam.columns({}) == {} and fam.cell({"methods": []}) is None


def test_reconstruction_leaves_large_updates_out_with_a_note_and_takes_its_labels():
    fam = FAMILIES.get("reconstruction")
    s = load_scenario("reconstruction-digits", ["reconstruction.max_samples=2"])
    t = s.stages["reconstruction"]
    assert fam.methods_for(t, 2) == (("inverting-gradients",), None)
    methods, note = fam.methods_for(t, 3)
    assert methods == () and note == ("3 samples > reconstruction.max_samples = 2: not "
                                      "reconstructed")
    settings = fam.settings(s)
    assert settings["label_method"] == "bias-count"
    assert settings["label_options"] == dict(s.stages["label_leakage.bias-count"])
    given = fam.settings(load_scenario("reconstruction-digits", ["reconstruction.labels=given"]))
    assert "label_method" not in given and given["iterations"] == 200


def test_reconstruction_reads_its_section():
    fam = FAMILIES.get("reconstruction")
    section = {"methods": ["ig"], "pooled": {"ig": {"samples": 8, "psnr": 20.25,
                                                   "ssim": 0.5, "ssim_gain": 0.25,
                                                   "identifiability": 0.75,
                                                   "prior_ssim": 0.25}}}
    assert fam.columns(section) == {"rec_psnr": 20.25, "rec_ssim": 0.5, "rec_ssim_gain": 0.25,
                                    "rec_identifiability": 0.75}
    assert fam.cell(section) == Headline(20.25, "PSNR 20.2 dB, 75% identifiable")
    assert fam.console(section) == ("reconstruction from the updates: ig: PSNR 20.2 dB, SSIM "
                                    "0.500 (prior 0.250), 75% identifiable")
    assert fam.cell({"methods": ["ig"], "pooled": {"ig": {"samples": 0}}}) is None


def test_the_reconstruction_cell_judges_the_ssim_gain_over_the_prior():
    fam = FAMILIES.get("reconstruction")
    pooled = {"samples": 16, "psnr": 11.5, "identifiability": 0.8125, "ssim_gain": 0.21,
              "ssim_gain_ci": [0.15, 0.27], "verdict": "above chance"}
    section = {"methods": ["inverting-gradients"], "pooled": {"inverting-gradients": pooled}}
    assert fam.cell(section) == Headline(
        11.5, "PSNR 11.5 dB, 81% identifiable, SSIM +0.21 [+0.15, +0.27] over the prior",
        verdict="above chance")
    older = {"methods": ["inverting-gradients"], "pooled": {"inverting-gradients": {
        "samples": 4, "psnr": 30.0, "identifiability": 1.0}}}
    assert fam.cell(older) == Headline(30.0, "PSNR 30.0 dB, 100% identifiable")


def test_reconstruction_rows_keep_the_true_labels_and_one_sample_identifies_nothing():
    """Client 0 holds two samples (labels 3, 5), client 1 one (label 7); each is rebuilt
    0.01 off every pixel, with the attack's labels 5, 3 and 7: reconstructions.npz keeps both
    labellings, and identifiability pools client 0 only (client 1's one candidate is
    identified whatever the picture)."""
    from attacks.reconstruction.registry import Reconstruction

    fam = FAMILIES.get("reconstruction")
    x0 = np.stack([np.full((1, 4, 4), 0.2), np.full((1, 4, 4), 0.8)])
    x1 = np.full((1, 1, 4, 4), 0.5)
    truths = [CaseTruth(0, 1, np.array([10, 11]), x0, np.array([3, 5])),
              CaseTruth(1, 1, np.array([12]), x1, np.array([7]))]
    outs = [CaseOutput(0, 1, {"ig": Reconstruction((x0 + 0.01).astype(np.float32), np.array([5, 3]),
                                                   0.0, 1)}, {"ig": 1.0}),
            CaseOutput(1, 1, {"ig": Reconstruction((x1 + 0.01).astype(np.float32), np.array([7]),
                                                   0.0, 1)}, {"ig": 1.0})]
    settings = {"labels": "given", "iterations": 1, "restarts": 1, "lr": 0.0,
                "max_samples": 16, "seed": 0}
    scored = fam.score(outs, Scoring(["ig"], truths, 10, np.full((1, 4, 4), 0.5), settings))
    rows = scored.arrays
    assert rows["true_id"].tolist() == [10, 11, 12]
    assert rows["label"].tolist() == [5, 3, 7] and rows["true_label"].tolist() == [3, 5, 7]
    assert rows["label_correct"].tolist() == [False, False, True]
    pooled = scored.section["pooled"]["ig"]
    assert pooled["identifiability"] == 1.0  # client 0's two, both identified
    alone = fam.score(outs[1:], Scoring(["ig"], truths[1:], 10, np.full((1, 4, 4), 0.5),
                                        settings)).section
    assert alone["pooled"]["ig"]["identifiability"] is None
    section = {"methods": ["ig"], **alone}
    assert fam.console(section).endswith("identifiability not meaningful (one sample per "
                                         "client)")
    (_, table) = fam.report(section)
    assert table.rows[0][7] == "– (1 sample per client)"


def test_the_console_shows_leakage_across_training():
    """Several attacked rounds: the console line ends with the first method's mean SSIM per
    round (each round's cases averaged); one round: no trend."""
    fam = FAMILIES.get("reconstruction")
    pooled = {"ig": {"samples": 6, "psnr": 10.0, "ssim": 0.1, "prior_ssim": 0.15,
                     "identifiability": 0.5}}
    cases = [{"client": c, "round": r, "num_examples": 4, "ig": {"ssim": s}}
             for c, r, s in ((0, 1, 0.2), (1, 1, 0.1), (0, 10, 0.05), (1, 10, 0.15),
                             (0, 20, 0.125))]
    line = fam.console({"methods": ["ig"], "pooled": pooled, "cases": cases})
    assert line.endswith("; SSIM by round 1: 0.150, 10: 0.100, 20: 0.125")
    one = fam.console({"methods": ["ig"], "pooled": pooled, "cases": cases[:2]})
    assert "by round" not in one


def test_the_section_says_which_options_the_attack_ran_with():
    """tv = "auto" is resolved inside the attack: results.json's ``options`` and the
    report's first line carry the weight it chose (1e-4 on these 4 x 4 images), read from
    the reconstruction's info (only the attack's declared options)."""
    from attacks.reconstruction.registry import Reconstruction

    fam = FAMILIES.get("reconstruction")
    x = np.full((1, 1, 4, 4), 0.5)
    info = {"tv": 1e-4, "signed": True, "weighting": "equal", "lr_decay": True,
            "init": "randn", "keep": "last", "lr": 0.1, "restart_losses": [0.0]}
    outs = [CaseOutput(0, 1, {"inverting-gradients": Reconstruction(
        x.astype(np.float32), np.array([7]), 0.0, 1, info=info)},
        {"inverting-gradients": 1.0})]
    settings = {"labels": "given", "iterations": 1, "restarts": 1, "lr": 0.0,
                "max_samples": 16, "seed": 0}
    section = fam.score(outs, Scoring(["inverting-gradients"],
                                      [CaseTruth(0, 1, np.array([3]), x, np.array([7]))], 10,
                                      x[0], settings)).section
    assert section["options"] == {"inverting-gradients": {
        "tv": 1e-4, "signed": True, "weighting": "equal", "lr_decay": True, "init": "randn",
        "keep": "last"}}
    first = fam.report({"methods": ["inverting-gradients"], **section})[0]
    assert first.endswith(" inverting-gradients: tv 0.0001, signed True, weighting equal, "
                          "lr_decay True, init randn, keep last.")
