"""Planting secret-sharer canaries ([canaries] kind = "secret") into text clients: the
inserted sequences by hand, the references, the vocabulary extension, stable ids, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedaudit.config import ScenarioError, validate
from fedaudit.data.datasets.base import TextMeta
from fedaudit.data.secrets import plant_secrets

#: 2 clients of 3 windows (L = 12) over the vocabulary of "abc xyz:\n"
VOCAB = tuple(sorted(set("abc xyz:\n")))


def _windows(text: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.array([VOCAB.index(c) for c in text * 10], dtype=np.int64)
    x = np.stack([t[i * 12:(i + 1) * 12] for i in range(n)])
    y = np.stack([t[i * 12 + 1:(i + 1) * 12 + 1] for i in range(n)])
    return x, y


def _cfg(**values):
    base = dataclasses.replace(validate({}).canaries, kind="secret", count=1, clients=(0, 1),
                               template="ab:", alphabet="0123", secret_length=2,
                               repeats=(1, 3), references=4)
    return dataclasses.replace(base, **values)


def _plant(cfg=None, seed=0):
    xa, ya = _windows("abc abc\n", 3)
    xb, yb = _windows("xyz xyz\n", 3)
    x, y = np.concatenate([xa, xb]), np.concatenate([ya, yb])
    meta = TextMeta(("A", "B"), np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 0, 1, 1, 1]))
    return plant_secrets(x, y, VOCAB, meta, [np.arange(3), np.arange(3, 6)], cfg or _cfg(),
                         seed)


def test_secrets_inserted_by_hand():
    p = _plant()
    s = p.secrets
    # planting order: client 0 (repeats 1, 3), client 1 (repeats 1, 3), then 4 references
    assert s.client.tolist() == [0, 0, 1, 1, -1, -1, -1, -1]
    assert s.repeats.tolist() == [1, 3, 1, 3, 0, 0, 0, 0]
    assert [len(i) for i in s.sequence_ids] == [1, 3, 1, 3, 0, 0, 0, 0]
    assert np.concatenate(s.sequence_ids).tolist() == list(range(6, 14))  # after the corpus
    texts = {s.text(j, p.vocab) for j in range(s.size)}
    assert len(texts) == 8 and all(len(t) == 2 and set(t) <= set("0123") for t in texts)
    # the digits joined the vocabulary after the corpus's characters: old ids unchanged
    assert p.vocab == VOCAB + ("0", "1", "2", "3")
    assert s.prefix.tolist() == [p.vocab.index(c) for c in "ab:"]
    for j in range(4):
        own = "abc abc\n" if s.client[j] == 0 else "xyz xyz\n"
        for i in s.sequence_ids[j]:
            seq = "".join(p.vocab[t] for t in np.concatenate([p.x[i], p.y[i][-1:]]))
            head = "ab:" + s.text(j, p.vocab) + "\n"
            assert seq.startswith(head) and len(seq) == 13
            assert seq[len(head):] in own * 3  # the rest: the client's own words
            assert i in p.clients[s.client[j]] and p.canary[i]
            assert p.text.speaker[i] == s.client[j]  # roles A, B are clients 0, 1
    assert not p.canary[:6].any() and np.array_equal(p.x[:6], _plant().x[:6])
    assert len(np.unique(p.text.speech[6:])) == 8  # each insertion a speech of its own


def test_planting_is_reproducible_and_seeded():
    a, b, c = _plant(), _plant(), _plant(seed=1)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.secrets.tokens, b.secrets.tokens)
    assert not np.array_equal(a.secrets.tokens, c.secrets.tokens)


@pytest.mark.parametrize("values, fragment", [
    ({"secret_length": 1}, r"8 distinct secrets needed, .* has 4"),
    ({"template": "ab:abcabcab"}, r"exceed data.seq_len \+ 1 = 13"),
    ({"alphabet": "00"}, "distinct characters"),
    ({"repeats": (0,)}, "each value must be >= 1"),
])
def test_planting_errors(values, fragment):
    with pytest.raises(ScenarioError, match=fragment):
        _plant(_cfg(**values))


# ---------------------------------------------------------------- the secrets stage

def _table_model(p, memorise: int):
    """A next-token table over the planted vocabulary: uniform, except that after the
    template it spells secret ``memorise`` with probability 0.9 per token."""
    v = len(p.vocab)
    s = p.secrets
    want = {tuple(s.prefix.tolist()) + tuple(s.tokens[memorise][:i].tolist()): s.tokens[memorise][i]
            for i in range(s.tokens.shape[1])}

    def call(contexts):
        out = np.full((len(contexts), v), 0.1 / (v - 1))
        for i, ctx in enumerate(contexts):
            tok = want.get(tuple(ctx.tolist()))
            if tok is None:
                out[i] = 1.0 / v
            else:
                out[i, tok] = 0.9
        return np.log(out)
    return call


def test_view_exposure_ranks_the_memorised_secret_first(monkeypatch):
    from fedaudit.audit.stages import secrets as stage

    p = _plant()
    model = _table_model(p, memorise=2)
    expo, extracted, method = stage.view_exposure(model, p.secrets, beam=1, seed=0)
    assert method == "exact: all 16 candidates ranked"
    # by hand: the memorised secret has rank 1 of 16 (4 bits); the 3 other candidates that
    # share its first token (0.9, then uniform) tie at ranks 2..4 -> rank 4, 2 bits; the 12
    # that start otherwise (0.1 / (v - 1) < 1 / v) tie last -> rank 16, 0 bits
    first = p.secrets.tokens[:, 0] == p.secrets.tokens[2, 0]
    want = np.where(np.arange(8) == 2, 4.0, np.where(first, 2.0, 0.0))
    assert expo.tolist() == want.tolist()
    assert extracted.tolist() == [i == 2 for i in range(8)]
    monkeypatch.setattr(stage, "EXACT_LIMIT", 8)
    monkeypatch.setattr(stage, "SAMPLE", 12)
    expo2, extracted2, method2 = stage.view_exposure(model, p.secrets, beam=1, seed=0)
    assert method2.startswith("extrapolated: skew-normal fit to 12 of 16")
    assert expo2[2] > 4.0 and np.array_equal(extracted2, extracted)


def test_gnq_percentiles_by_hand():
    from fedaudit.audit.stages.secrets import gnq_percentiles

    p = _plant()
    s = p.secrets
    c0 = p.clients[0]  # 3 corpus windows + 1 + 3 inserted copies
    sid = np.concatenate([c0, c0])  # each scored twice: totals are twice the score
    score = np.concatenate([np.arange(len(c0), dtype=float)] * 2)
    got = gnq_percentiles(sid, score, tuple(p.clients), s)
    rank = {int(i): (k + 1) / len(c0) * 100 for k, i in enumerate(c0)}  # distinct, ascending
    # 100 * k / n here, k / n * 100 by hand: equal up to two roundings (1e-12 is ample)
    assert got[0] == pytest.approx(rank[int(s.sequence_ids[0][0])], abs=1e-12)
    assert got[1] == pytest.approx(np.mean([rank[int(i)] for i in s.sequence_ids[1]]), abs=1e-12)
    assert np.isnan(got[2:]).all()  # client 1 was not scored; references never are


def test_secret_canaries_need_text_and_image_canaries_need_images():
    with pytest.raises(ScenarioError, match=r"canaries.kind = 'secret': .* is images; "
                                            r"allowed: mislabeled, noise"):
        validate({"canaries": {"kind": "secret", "count": 1}})
    with pytest.raises(ScenarioError, match=r"canaries.kind = 'mislabeled': .* is text; "
                                            r"allowed: secret"):
        validate({"data": {"dataset": "shakespeare", "path": "x.txt"},
                  "model": {"name": "transformer"}, "canaries": {"count": 1}})
