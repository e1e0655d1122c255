"""Text data: the play parser, windows and targets, vocabulary and stable ids, the split
and partitions by speech, the ``speaker`` partitioner, and the error messages."""

import dataclasses

import numpy as np
import pytest

from fedaudit.config import ScenarioError, validate
from fedaudit.data import build_federated_data, load_dataset
from fedaudit.data.datasets.shakespeare import parse_speeches, windows
from fedaudit.data.text import (speaker_clients, speech_labels, split_speeches,
                                subsample_text)

from tests.helpers.paths import SHARED_DATA

SHAKESPEARE = SHARED_DATA / "tinyshakespeare.txt"

#: three roles; with seq_len 4 ALPHA has 4 + 2 windows, BETA 2 + 2, GAMMA 1
TOY = ("ALPHA:\nabcdefghij\nklmno\n\n"
       "BETA:\n0123456789\n\n"
       "ALPHA:\npqrstuvwxyz\n\n"
       "GAMMA:\nhello\n\n\n"
       "BETA:\n9876543210\n")


def _data(**values):
    """A ``[data]`` config (not cross-checked: the loader is under test)."""
    return validate({}).data.replace(**{"dataset": "shakespeare", **values})


def _toy(tmp_path, text=TOY, **values):
    p = tmp_path / "play.txt"
    p.write_text(text, encoding="utf-8")
    return load_dataset(_data(path=str(p), **values))


def _chars(ds, row):
    return "".join(ds.classes[t] for t in row)


def test_parse_speeches_keeps_roles_lines_and_unnamed_blocks():
    got = parse_speeches("A:\nx\ny\n\n  \nB C:\nz\n\nno name here\nsecond: line\n\nD:\n")
    assert got == [("A", "x\ny\n"), ("B C", "z\n"), (None, "no name here\nsecond: line\n"),
                   ("D", "")]


def test_windows_by_hand():
    t = np.arange(10)  # n = 10, L = 3: (10 - 1) // 3 = 3 windows, nothing dropped
    x, y = windows(t, 3)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert y.tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    x, y = windows(np.arange(9), 3)  # 8 // 3 = 2 windows: the last character is dropped
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]] and y.tolist() == [[1, 2, 3], [4, 5, 6]]
    x, y = windows(np.arange(3), 3)  # too short for one window (needs L + 1)
    assert x.shape == y.shape == (0, 3) and x.dtype == np.int64


def test_toy_play_windows_targets_vocab_roles(tmp_path):
    ds = _toy(tmp_path, seq_len=4)
    assert ds.kind == "text" and ds.x.dtype == ds.y.dtype == np.int64
    assert ds.classes == tuple(sorted(set(TOY)))  # the file's characters, names included
    assert [_chars(ds, r) for r in ds.x] == [
        "abcd", "efgh", "ij\nk", "lmno",  # ALPHA's first speech: "abcdefghij\nklmno\n"
        "0123", "4567",  # BETA: "0123456789\n" (the last 2 characters dropped)
        "pqrs", "tuvw",  # ALPHA again
        "hell",  # GAMMA: "hello\n"
        "9876", "5432"]
    assert [_chars(ds, r) for r in ds.y[:4]] == ["bcde", "fghi", "j\nkl", "mno\n"]
    assert (ds.x[:, 1:] == ds.y[:, :-1]).all()
    assert ds.text.roles == ("ALPHA", "BETA", "GAMMA")
    assert ds.text.speaker.tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 2, 1, 1]
    assert ds.text.speech.tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 3, 4, 4]
    assert ds.notes == ()


def test_loading_twice_gives_identical_ids(tmp_path):
    a, b = _toy(tmp_path, seq_len=3), _toy(tmp_path, seq_len=3)
    for u, v in ((a.x, b.x), (a.y, b.y), (a.text.speaker, b.text.speaker),
                 (a.text.speech, b.text.speech)):
        assert np.array_equal(u, v)
    assert a.classes == b.classes and a.text.roles == b.text.roles


def test_speaker_partitioner_exact_clients(tmp_path):
    ds = _toy(tmp_path, seq_len=4)
    train = np.arange(len(ds.y))
    clients, roles = speaker_clients(train, ds.text, 2, min_role_sequences=2)
    assert roles.tolist() == [0, 1]  # ALPHA (6), BETA (4); GAMMA (1) below the minimum
    assert [c.tolist() for c in clients] == [[0, 1, 2, 3, 6, 7], [4, 5, 9, 10]]
    clients, roles = speaker_clients(train, ds.text, 3, min_role_sequences=1)
    assert [c.tolist() for c in clients] == [[0, 1, 2, 3, 6, 7], [4, 5, 9, 10], [8]]
    # only the training ids count: without ALPHA's first speech BETA is the largest
    part = np.array([4, 5, 6, 7, 8, 9, 10])
    clients, roles = speaker_clients(part, ds.text, 2, min_role_sequences=1)
    assert roles.tolist() == [1, 0] and clients[1].tolist() == [6, 7]
    with pytest.raises(ScenarioError, match=r"^federation.num_clients = 3: .*found 2 roles "
                       r"with at least data.min_role_sequences = 2 .*allowed: 1..2"):
        speaker_clients(train, ds.text, 3, min_role_sequences=2)


def test_speech_labels(tmp_path):
    ds = _toy(tmp_path, seq_len=4)
    speeches, labels = speech_labels(np.array([0, 3, 4, 8, 9]), ds.text)
    assert speeches.tolist() == [0, 1, 3, 4] and labels.tolist() == [0, 1, 2, 1]


def _play(roles=("ANNA", "BORIS", "CLARA", "DMITRI"), speeches=30, seed=0):
    """A bigger generated play: speeches of 1..4 windows of 8 characters, roles in turn."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefgh ij"))
    out = []
    for s in range(speeches * len(roles)):
        n = 8 * int(rng.integers(1, 5)) + 1
        out.append(f"{roles[s % len(roles)]}:\n{''.join(rng.choice(letters, n - 1))}\n")
    return "\n".join(out)


def test_split_by_speech_is_whole_disjoint_and_stratified(tmp_path):
    ds = _toy(tmp_path, _play(speeches=60), seq_len=8)
    tr, ho, te = split_speeches(ds.text, 0.2, 0.25, seed=3)
    assert sorted(np.concatenate([tr, ho, te]).tolist()) == list(range(len(ds.y)))
    speech = ds.text.speech
    sets = [set(speech[ids].tolist()) for ids in (tr, ho, te)]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])  # whole speeches
    for role in range(4):  # each role's share within one speech (<= 4 of its ~150 windows)
        n = (ds.text.speaker == role).sum()
        for ids, f in ((te, 0.25), (ho, 0.2)):
            assert abs((ds.text.speaker[ids] == role).sum() - f * n) <= 4 + 1
    again = split_speeches(ds.text, 0.2, 0.25, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((tr, ho, te), again))
    assert not np.array_equal(te, split_speeches(ds.text, 0.2, 0.25, seed=4)[2])


def test_subsample_keeps_whole_speeches(tmp_path):
    ds = _toy(tmp_path, _play(speeches=20), seq_len=8)
    sub = subsample_text(ds, 37, seed=1)
    assert len(sub.y) == 37 and np.all(np.diff(sub.text.speech) >= 0)
    # each kept speech keeps its first windows, in order, with the file's speech numbers
    for s in np.unique(sub.text.speech):
        rows = sub.x[sub.text.speech == s]
        assert np.array_equal(rows, ds.x[ds.text.speech == s][:len(rows)])
    assert (np.bincount(sub.text.speech)[np.unique(sub.text.speech)]
            < np.bincount(ds.text.speech)[np.unique(sub.text.speech)]).sum() <= 1
    assert np.array_equal(subsample_text(ds, 37, seed=1).x, sub.x)


def _scenario(path, **data):
    return validate({"data": {"dataset": "shakespeare", "path": str(path), "seq_len": 8,
                              **data},
                     "model": {"name": "transformer"}, "federation": {"num_clients": 3}})


@pytest.mark.parametrize("partitioner", ["speaker", "iid", "dirichlet", "pathological"])
def test_federated_text_data_keeps_speeches_whole(tmp_path, partitioner):
    p = tmp_path / "play.txt"
    p.write_text(_play(speeches=40), encoding="utf-8")
    data = build_federated_data(_scenario(p, partitioner=partitioner, alpha=1.0,
                                          min_role_sequences=5))
    text = data.text
    assert data.x.shape[1] == 8 and data.num_classes == len(set(p.read_text()))
    owner = data.client_of()
    for s in np.unique(text.speech):  # one owner per speech (-1: holdout, test, unused)
        assert len(set(owner[text.speech == s].tolist())) == 1
    assert sorted(np.concatenate(data.clients).tolist()) == data.train.tolist()
    splits = [set(ids.tolist()) for ids in (data.train, data.holdout, data.test)]
    assert not (splits[0] & splits[1] or splits[0] & splits[2] or splits[1] & splits[2])
    if partitioner == "speaker":
        roles = [set(text.speaker[c].tolist()) for c in data.clients]
        assert all(len(r) == 1 for r in roles)
        chosen = set().union(*roles)
        assert len(chosen) == 3  # the three largest of the four roles
        assert set(text.speaker[data.holdout].tolist()) <= chosen
        assert set(text.speaker[data.test].tolist()) <= chosen
        assert all(set(text.speaker[c].tolist()) == r for c, r in zip(data.clients, roles))
        # every training sequence of a chosen role is its client's
        for c, (r,) in zip(data.clients, roles):
            others = np.setdiff1d(np.flatnonzero(text.speaker == r),
                                  np.concatenate([data.holdout, data.test]))
            assert np.array_equal(c, others)


def test_shakespeare_file(tmp_path):
    if not SHAKESPEARE.is_file():
        pytest.skip("../shared/data/tinyshakespeare.txt is absent")
    ds = load_dataset(_data(path=str(SHAKESPEARE), seq_len=80))
    again = load_dataset(_data(path=str(SHAKESPEARE), seq_len=80))
    assert np.array_equal(ds.x, again.x) and np.array_equal(ds.text.speech, again.text.speech)
    assert len(ds.classes) == 65 and ds.x.shape == ds.y.shape == (9635, 80)
    # 7,222 blank-line separated blocks, each opened by a NAME: line (125 with no lines),
    # 309 distinct names; 3,812 speeches are shorter than 81 characters
    assert len(ds.text.roles) == 309 and (ds.text.speaker >= 0).all()
    assert ds.text.roles[:2] == ("First Citizen", "All")
    assert "3812 of 7222 speeches" in ds.notes[0]
    # the first nine speeches are shorter than 81 characters: the first window is the 10th
    assert _chars(ds, ds.x[0]).startswith("We are accounted poor citizens")
    assert ds.text.speech[0] == 9
    data = build_federated_data(validate({
        "data": {"dataset": "shakespeare", "path": str(SHAKESPEARE), "partitioner": "speaker"},
        "model": {"name": "transformer"}, "federation": {"num_clients": 10}}))
    assert [ds.text.roles[data.text.speaker[c[0]]] for c in data.clients][:3] == [
        "GLOUCESTER", "KING RICHARD II", "DUKE VINCENTIO"]


# ----------------------------------------------------------------------------- errors


def test_bad_files_name_data_path(tmp_path):
    for path, why in ((tmp_path / "nope.txt", "no such file"), (tmp_path, "no such file")):
        with pytest.raises(ScenarioError, match=f"^data.path = .*: {why}$"):
            load_dataset(_data(path=str(path)))
    (tmp_path / "empty.txt").write_text("  \n\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"^data.path = .*empty.txt': the file is empty$"):
        load_dataset(_data(path=str(tmp_path / "empty.txt")))
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00\x81 not utf-8")
    with pytest.raises(ScenarioError, match=r"^data.path = .*not a readable UTF-8 text file "
                       r"\(UnicodeDecodeError\)$"):
        load_dataset(_data(path=str(tmp_path / "bin.txt")))
    with pytest.raises(ScenarioError, match=r"^data.path = .*: no speech has data.seq_len "
                       r"\+ 1 = 81 characters"):
        _toy(tmp_path, seq_len=80)


def test_no_speeches_refuses_only_the_speaker_partitioner(tmp_path):
    p = tmp_path / "prose.txt"
    p.write_text("\n".join(f"paragraph {i}: prose\nwithout names\n" for i in range(20)))
    data = build_federated_data(_scenario(p, partitioner="iid"))
    assert data.text.roles == () and (data.text.speaker == -1).all()
    with pytest.raises(ScenarioError, match=r"^data.path = .*prose.txt': no 'NAME:' "
                       r"speeches, which data.partitioner = 'speaker' needs"):
        build_federated_data(_scenario(p, partitioner="speaker"))


def test_text_refuses_image_canaries(tmp_path):
    p = tmp_path / "play.txt"
    p.write_text(_play(), encoding="utf-8")
    s = _scenario(p)
    with pytest.raises(ScenarioError, match=r"^canaries.kind = .mislabeled.: the mislabeled "
                                            r"canaries are images; text data .* takes "
                                            r"canaries.kind = .secret."):
        build_federated_data(dataclasses.replace(
            s, canaries=dataclasses.replace(s.canaries, count=2)))


@pytest.mark.parametrize("sections, message", [
    ({"data": {"seq_len": 0}}, r"data.seq_len = 0"),
    ({"data": {"min_role_sequences": 0}}, r"data.min_role_sequences = 0"),
    ({"model": {"layers": 0}}, r"model.layers = 0"),
    ({"data": {"partitioner": "speaker"}},
     r"data.partitioner = 'speaker' needs text data .*not 'digits'"),
    ({"model": {"name": "transformer"}},
     r"model.name = 'transformer': data.dataset = 'digits' is images; "
     r"allowed: cnn, mlp, resnet18$"),
    ({"data": {"dataset": "shakespeare", "path": "x.txt"}},
     r"model.name = 'cnn': data.dataset = 'shakespeare' is text; allowed: transformer$"),
    ({"data": {"dataset": "shakespeare", "path": "x.txt"},
      "model": {"name": "transformer", "width": 30, "heads": 4}},
     r"model.heads = 4: must divide model.width = 30$"),
    ({"data": {"dataset": "shakespeare"}, "model": {"name": "transformer"}},
     r"data.path is required when data.dataset = 'shakespeare'"),
])
def test_scenario_keys_are_checked_in_one_line(sections, message):
    with pytest.raises(ScenarioError, match=message) as exc:
        validate(sections)
    assert "\n" not in str(exc.value)


def test_preflight_accepts_a_run_on_text(tmp_path):
    from fedaudit.config.preflight import check_scenario

    p = tmp_path / "play.txt"
    p.write_text(_play(), encoding="utf-8")
    assert check_scenario(_scenario(p)).attack.methods == ("loss", "zlib")
