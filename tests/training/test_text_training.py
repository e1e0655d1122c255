"""Sequences train and are attacked: the shared loss (bit-identical to F.cross_entropy on
images, a hand loop over tokens on sequences), per-sequence losses and accuracy, DP-SGD
through Opacus on a transformer, the oracle on (B, L, V) outputs, LOSS and zlib on text
against hand computations, non-members matched by role, and the one-line refusals of
attacks that assume images."""

from __future__ import annotations

import math
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attacks.membership.baselines import loss_attack, loss_scores, mentropy_scores
from attacks.membership import evaluate_attacks
from attacks.membership.oracle import Oracle
from attacks.membership.zlib import decode, zlib_attack, zlib_entropy, zlib_scores
from fedaudit.config import ScenarioError, validate
from fedaudit.gnq import per_sample_gradients
from fedaudit.models import build_text_model
from fedaudit.scenario import GnqConfig, TrainConfig
from fedaudit.training import evaluate, per_sample_losses, train_local
from fedaudit.training.losses import batch_loss, correct, sample_losses, summed_loss

from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread_module")

V, L = 7, 5


def _tiny(seed=0, dtype=torch.float32) -> nn.Module:
    return build_text_model("transformer", vocab_size=V, seq_len=L, width=8, layers=1,
                            heads=2, seed=seed).to(dtype)


def _tokens(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, V, size=(n, L)).astype(np.int64),
            rng.integers(0, V, size=(n, L)).astype(np.int64))


def _hand_losses(logits: torch.Tensor, y: torch.Tensor) -> list[float]:
    out = []
    for i in range(logits.shape[0]):
        nll = [-float(torch.log_softmax(logits[i, t].double(), 0)[y[i, t]])
               for t in range(logits.shape[1])]
        out.append(sum(nll) / len(nll))
    return out


def test_shared_loss_is_cross_entropy_bit_for_bit_on_images():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(33, 10, generator=g)
    y = torch.randint(0, 10, (33,), generator=g)
    assert torch.equal(batch_loss(z, y), F.cross_entropy(z, y))
    assert torch.equal(summed_loss(z, y), F.cross_entropy(z, y, reduction="sum"))
    assert torch.equal(sample_losses(z.double(), y),
                       F.cross_entropy(z.double(), y, reduction="none"))
    assert torch.equal(correct(z, y), z.argmax(1) == y)


def test_shared_loss_on_sequences_is_the_mean_token_nll():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(4, 6, 9, generator=g, dtype=torch.float64)
    y = torch.randint(0, 9, (4, 6), generator=g)
    hand = torch.tensor(_hand_losses(z, y), dtype=torch.float64)
    torch.testing.assert_close(sample_losses(z, y), hand, rtol=1e-12, atol=0)
    torch.testing.assert_close(batch_loss(z, y), hand.mean(), rtol=1e-12, atol=0)
    torch.testing.assert_close(summed_loss(z, y), hand.sum(), rtol=1e-12, atol=0)
    # the batch mean is the token-mean cross-entropy over all B L targets
    torch.testing.assert_close(batch_loss(z, y), F.cross_entropy(z.reshape(-1, 9), y.reshape(-1)),
                               rtol=1e-12, atol=0)
    assert correct(z, y).shape == (4, 6)
    with pytest.raises(ValueError, match=r"expected \(B, C\) logits"):
        sample_losses(z, y[:, 0])


def test_per_sample_losses_and_evaluate_on_a_transformer_by_hand():
    model, (x, y) = _tiny(), _tokens()
    losses, hits = per_sample_losses(model, x, y, device=torch.device("cpu"), batch_size=4)
    with torch.no_grad():
        logits = model(torch.from_numpy(x))
    np.testing.assert_allclose(losses, _hand_losses(logits, torch.from_numpy(y)), rtol=1e-6)
    assert hits.shape == (6, L)
    np.testing.assert_array_equal(hits, logits.argmax(-1).numpy() == y)
    acc, loss = evaluate(model, x, y, device=torch.device("cpu"))
    assert acc == pytest.approx(hits.mean()) and loss == pytest.approx(losses.mean())


def _opacus_grad_samples(model, x, y):
    from tests.helpers.opacus_reference import opacus_grad_samples

    # the summed per-sequence loss over the batch: what train_local_dpsgd runs
    return opacus_grad_samples(model, x, y, clip=1e12,
                               batch_loss=lambda out, t: summed_loss(out, t) / len(t))


def test_opacus_per_sequence_gradients_are_each_sequences_own_loss_gradient():
    """Opacus' grad samplers (Embedding, Linear, LayerNorm on (B, L, d)) with the summed
    per-sequence loss divided by the batch: row i is the gradient of sequence i's mean
    token NLL, as for images (the scale DP-SGD clips)."""
    x, y = (torch.from_numpy(a) for a in _tokens(5))
    model = _tiny(dtype=torch.float64)
    G = per_sample_gradients(model, x, y, sample_losses)
    grads = _opacus_grad_samples(model, x, y)
    flat = torch.cat([g.reshape(len(g), -1) for g in grads], dim=1)
    torch.testing.assert_close(flat, G, rtol=1e-8, atol=1e-12)


def test_dpsgd_trains_a_transformer_one_step_with_gnq():
    x, y = _tokens(8)
    model = _tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = TrainConfig(1, 8, "sgd", 0.1, 0.0, 0.0, "cpu")  # q = 1: one step of every sample
    res = train_local(model, x, y, np.arange(8), cfg, seed=3, device=torch.device("cpu"),
                      gnq=GnqConfig(True, True, 1e-2, "relative", 1e-2),
                      dp={"noise_multiplier": 0.5, "clip_norm": 1.0})
    assert res.dp_steps == 1 and res.dp_sample_rate == 1.0 and math.isfinite(res.loss)
    assert sorted(res.gnq_ids.tolist()) == list(range(8)) and np.isfinite(res.gnq_scores).all()
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not any(hasattr(p, "grad_sample") for p in model.parameters())


def test_plain_training_loss_is_the_sequence_loss():
    x, y = _tokens(4)
    model = _tiny()
    with torch.no_grad():
        first = float(np.mean(_hand_losses(model(torch.from_numpy(x)), torch.from_numpy(y))))
    cfg = TrainConfig(1, 4, "sgd", 1e-9, 0.0, 0.0, "cpu")  # one batch, the weights ~fixed
    res = train_local(model, x, y, np.arange(4), cfg, seed=0, device=torch.device("cpu"))
    assert res.steps == 1 and res.loss == pytest.approx(first, rel=1e-5)


def test_oracle_returns_token_distributions_and_loss_is_minus_mean_token_nll():
    model, (x, y) = _tiny(), _tokens()
    oracle = Oracle(model, batch_size=4)
    p = oracle.predict_proba(x)
    assert p.shape == (6, L, V) and oracle.queries == 6
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)
    with torch.no_grad():
        hand = -np.array(_hand_losses(model(torch.from_numpy(x)), torch.from_numpy(y)))
    np.testing.assert_allclose(loss_attack(oracle, x, y), hand, rtol=1e-6)
    assert Oracle(model).predict_proba(x[:0]).shape == (0, L, V)
    onehot = Oracle(model, label_only=True).predict_proba(x)
    assert onehot.shape == p.shape and (onehot.sum(-1) == 1).all()


def test_token_mean_scores_by_hand():
    p = np.array([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]])  # one sequence, two tokens
    y = np.array([[0, 1]])
    assert loss_scores(p, y)[0] == pytest.approx((math.log(0.5) + math.log(0.8)) / 2)
    per_token = [mentropy_scores(p[0, t:t + 1], y[0, t:t + 1])[0] for t in range(2)]
    assert mentropy_scores(p, y)[0] == pytest.approx(np.mean(per_token))
    with pytest.raises(ValueError, match=r"y must be \(1, 2\) next-token targets"):
        loss_scores(p, y[:, 0])


class _Table(nn.Module):
    """A hand-made 'model': the same next-character distribution at every position."""

    def __init__(self, probs):
        super().__init__()
        self.logp = nn.Parameter(torch.log(torch.tensor(probs, dtype=torch.float64)))

    def forward(self, tokens):
        return self.logp.expand(*tokens.shape, -1)


def test_zlib_score_by_hand():
    vocab = ("a", "b", " ")
    x = np.array([[0, 0, 1, 2], [2, 1, 0, 0]])
    y = np.array([[0, 1, 2, 0], [1, 0, 0, 1]])
    assert decode(x, y, vocab) == ["aab a", " baab"]
    assert zlib_entropy("aab a") == 8 * len(zlib.compress(b"aab a"))
    oracle = Oracle(_Table([0.5, 0.3, 0.2]))
    got = zlib_attack(oracle, x, y, vocabulary=vocab)
    q = {0: 0.5, 1: 0.3, 2: 0.2}
    for i, text in enumerate(["aab a", " baab"]):
        perplexity = -np.mean([math.log(q[t]) for t in y[i]])
        assert got[i] == pytest.approx(-perplexity / (8 * len(zlib.compress(text.encode()))))
    # a repetitive text compresses better: the same likelihood scores lower
    p = np.full((2, 9, 2), 0.5)
    s = zlib_scores(p, np.zeros((2, 9), np.int64), ["a" * 10, "ab%cd&ef!g"])
    assert s[0] < s[1] < 0


def test_evaluate_attacks_passes_the_vocabulary_to_zlib():
    x, y = np.array([[0, 1, 2], [2, 2, 1]]), np.array([[1, 2, 0], [2, 1, 0]])
    oracle = Oracle(_Table([0.2, 0.3, 0.5]))
    with pytest.raises(ValueError, match="need the data's vocabulary"):
        evaluate_attacks(oracle, x, y, [1, 0], ["zlib"])
    out = evaluate_attacks(oracle, x, y, [1, 0], ["loss", "zlib"], vocabulary=("a", "b", "c"))
    assert out["zlib"].scores.shape == (2,) and out["loss"].queries_per_sample == 1


def _play(roles=("ANNA", "BORIS", "CLARA"), speeches=40, seed=0) -> str:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefgh ij"))
    return "\n".join(f"{roles[s % len(roles)]}:\n"
                     f"{''.join(rng.choice(letters, 8 * int(rng.integers(1, 4))))}\n"
                     for s in range(speeches * len(roles)))


def _text_sections(path, **attack):
    return {"data": {"dataset": "shakespeare", "path": str(path), "seq_len": 8,
                     "partitioner": "speaker", "min_role_sequences": 4},
            "model": {"name": "transformer", "width": 16}, "federation": {"num_clients": 3},
            "attack": attack}


def test_text_defaults_to_loss_and_zlib_and_nonmembers_match_roles(tmp_path):
    from fedaudit.audit.sets import attack_sets
    from fedaudit.config.preflight import check_scenario
    from fedaudit.data import build_federated_data

    p = tmp_path / "play.txt"
    p.write_text(_play(), encoding="utf-8")
    s = check_scenario(validate(_text_sections(p, members_per_client=10)))  # no refusal
    assert s.attack.methods == ("loss", "zlib")
    data = build_federated_data(s)
    for client, sets in zip(data.clients, attack_sets(s, data)):
        role = data.text.speaker[client[0]]
        assert (data.text.speaker[sets.nonmembers] == role).all() and sets.mismatched == 0
        assert len(sets.nonmembers) == len(sets.members)


def test_resmia_is_refused_for_text_in_one_line(tmp_path):
    p = tmp_path / "play.txt"
    p.write_text(_play(), encoding="utf-8")
    with pytest.raises(ScenarioError, match="'resmia', which scores image data only") as exc:
        validate(_text_sections(p, methods=["loss", "resmia"]))
    msg = str(exc.value)
    assert "\n" not in msg and "data.dataset = 'shakespeare' is text" in msg
    assert msg.endswith("allowed: confidence, entropy, fedmia, lira, loss, mentropy, rmia, "
                        "zlib")


def test_lira_augmented_queries_are_refused_for_text(tmp_path):
    from fedaudit.config.preflight import check_scenario

    p = tmp_path / "play.txt"
    p.write_text(_play(), encoding="utf-8")
    sections = _text_sections(p, methods=["lira"])
    sections["attack.lira"] = {"augment": "flip"}
    with pytest.raises(ScenarioError, match=r"^attack.lira: augment = 'flip' needs images .*"
                       r"use augment = 'none' \(the data's samples are 8\)$"):
        check_scenario(validate(sections))


def test_a_sequence_as_two_outcomes_by_hand():
    from attacks.membership.reference_signals import ReferenceSignals, logit_confidence
    from attacks.membership.lira import lira_attack, lira_scores
    from attacks.membership.sequences import as_outcomes

    p = np.array([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]],
                  [[0.2, 0.2, 0.6], [0.3, 0.3, 0.4]]])  # 2 sequences of 2 tokens
    y = np.array([[0, 1], [2, 2]])
    out, labels = as_outcomes(p, y)
    pbar = np.array([math.sqrt(0.5 * 0.8), math.sqrt(0.6 * 0.4)])
    np.testing.assert_allclose(out, np.stack([pbar, 1 - pbar], 1), rtol=1e-12)
    assert labels.tolist() == [0, 0]
    np.testing.assert_allclose(logit_confidence(out, labels), np.log(pbar / (1 - pbar)),
                               rtol=1e-12)
    images = np.array([[0.2, 0.8]])
    assert as_outcomes(images, np.array([1]))[0] is images  # classes pass through
    # LiRA on text: the target's logit(pbar) against the references' (already reduced)
    oracle = Oracle(_Table([0.5, 0.3, 0.2]))
    x = np.zeros((2, 2), np.int64)
    refs = np.stack([as_outcomes(np.full((2, 2, 3), q), y)[0]
                     for q in ([0.4, 0.3, 0.3], [0.3, 0.3, 0.4], [0.2, 0.5, 0.3])])
    got = lira_attack(oracle, x, y, references=ReferenceSignals.out_only(refs, x, y))
    target = logit_confidence(*as_outcomes(oracle.predict_proba(x), y))
    np.testing.assert_allclose(got.scores, lira_scores(target, logit_confidence(refs, labels)))


def test_zlib_is_refused_for_images():
    with pytest.raises(ScenarioError, match=r"attack.methods lists 'zlib', which scores text "
                       r"data only; data.dataset = 'digits' is image; allowed: .*resmia"):
        validate({"attack": {"methods": ["zlib"]}})


def test_validate_refuses_resmia_on_text_with_exit_2_and_one_line(tmp_path):
    p = tmp_path / "play.txt"
    p.write_text(_play(), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "fedaudit.cli", "validate",
         str(ROOT / "scenarios" / "shakespeare-small.toml"), "--set", f"data.path={p}",
         "--set", "attack.methods=['loss', 'resmia']"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'resmia', which scores image data only" in lines[0]
