"""Splits, partitioners, loaders and canaries (a run that reads an image folder with an
unreadable file: tests/e2e/test_imagefolder_run.py)."""

import numpy as np
import pytest

from fedaudit.config import ScenarioError, validate
from fedaudit.data import (build_federated_data, inject_canaries, load_dataset, partition_ids,
                           split_ids)

from tests.helpers.images import write_png


def labels(n=1000, k=10, seed=0):
    return np.random.default_rng(seed).integers(0, k, n)


def test_splits_disjoint_cover_and_stable():
    y = labels()
    tr, ho, te = split_ids(y, 0.2, 0.25, seed=3)
    assert len(set(tr) & set(ho)) == len(set(tr) & set(te)) == len(set(ho) & set(te)) == 0
    assert sorted(np.concatenate([tr, ho, te]).tolist()) == list(range(len(y)))
    assert len(te) == 250 and len(ho) == 200
    again = split_ids(y, 0.2, 0.25, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((tr, ho, te), again))
    other = split_ids(y, 0.2, 0.25, seed=4)
    assert not np.array_equal(tr, other[0])
    # stratified: every class present in every split in proportion
    for ids in (tr, ho, te):
        share = np.bincount(y[ids], minlength=10) / len(ids)
        assert np.abs(share - np.bincount(y) / len(y)).max() < 0.02


@pytest.mark.parametrize("scheme", ["iid", "dirichlet", "pathological"])
def test_partitions_are_disjoint_and_deterministic(scheme):
    y = labels(2000)
    train = np.arange(0, 2000, 2)  # global ids need not be contiguous
    parts = partition_ids(train, y[train], 10, scheme, seed=1, alpha=0.5, classes_per_client=3)
    assert len(parts) == 10
    flat = np.concatenate(parts)
    assert len(flat) == len(set(flat.tolist()))
    assert set(flat.tolist()) <= set(train.tolist())
    assert all(len(p) > 0 for p in parts)
    again = partition_ids(train, y[train], 10, scheme, seed=1, alpha=0.5, classes_per_client=3)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    if scheme == "iid":
        assert sorted(flat.tolist()) == train.tolist()
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    if scheme == "pathological":
        assert all(len(np.unique(y[p])) <= 3 for p in parts)


def _mean_top_class_share(parts, y):
    return np.mean([np.bincount(y[p]).max() / len(p) for p in parts])


def test_dirichlet_small_alpha_skews_labels():
    y = labels(3000)
    train = np.arange(3000)
    skewed = partition_ids(train, y, 10, "dirichlet", seed=0, alpha=0.05, min_partition_size=5)
    flat = partition_ids(train, y, 10, "dirichlet", seed=0, alpha=100.0)
    iid = partition_ids(train, y, 10, "iid", seed=0)
    assert _mean_top_class_share(skewed, y) > 0.5
    assert _mean_top_class_share(flat, y) < 0.2
    assert _mean_top_class_share(iid, y) < 0.2


def test_more_clients_than_samples_is_an_input_error():
    y = labels(20)
    with pytest.raises(ScenarioError, match="more clients than training samples"):
        partition_ids(np.arange(20), y, 50, "iid", seed=0)


def test_digits_loader_shape_range():
    ds = load_dataset(validate({}).data)
    assert ds.x.shape == (1797, 1, 8, 8) and ds.x.dtype == np.float32
    assert 0.0 <= ds.x.min() and ds.x.max() <= 1.0
    assert ds.num_classes == 10


def test_federated_data_contract():
    s = validate({"federation": {"num_clients": 5}, "canaries": {"count": 3, "clients": [1, 2]}})
    d = build_federated_data(s)
    assert len(d.clients) == 5
    assert np.array_equal(np.sort(np.concatenate(d.clients)), d.train)
    assert not set(d.train) & set(d.holdout) and not set(d.train) & set(d.test)
    assert d.canary.sum() == 6
    assert set(np.flatnonzero(d.canary)) <= set(d.clients[1]) | set(d.clients[2])
    assert d.client_of()[d.clients[3][0]] == 3 and d.client_of()[d.test[0]] == -1
    assert not d.x.flags.writeable


def test_mislabeled_canaries_change_labels_noise_changes_images():
    x = np.zeros((40, 1, 4, 4), dtype=np.float32)
    y = np.arange(40) % 4
    clients = [np.arange(0, 20), np.arange(20, 40)]
    x2, y2, mask = inject_canaries(x, y, clients, 5, [1], "mislabeled", 4, seed=0)
    assert mask.sum() == 5 and mask[:20].sum() == 0
    assert np.all(y2[mask] != y[mask]) and np.array_equal(y2[~mask], y[~mask])
    assert np.array_equal(x2, x)
    x3, y3, mask3 = inject_canaries(x, y, clients, 5, [0], "noise", 4, seed=0)
    assert np.array_equal(y3, y) and x3[mask3].std() > 0.1 and np.all(x3[~mask3] == 0)


def _data(**values):
    """A ``[data]`` config with ``values`` (not cross-checked: the loaders are under test)."""
    return validate({}).data.replace(**values)


def _npz(tmp_path, **arrays):
    p = tmp_path / "d.npz"
    np.savez(p, **arrays)
    return _data(dataset="npz", path=str(p))


def test_npz_loader_accepts_uint8_and_float(tmp_path):
    rng = np.random.default_rng(0)
    cfg = _npz(tmp_path, x=rng.integers(0, 256, (30, 6, 6), dtype=np.uint8),
               y=np.arange(30) % 3, classes=np.array(["a", "b", "c"]))
    ds = load_dataset(cfg)
    assert ds.x.shape == (30, 1, 6, 6) and ds.x.max() <= 1.0 and ds.classes == ("a", "b", "c")
    cfg = _npz(tmp_path, x=rng.random((30, 3, 6, 6)), y=np.arange(30) % 3)
    assert load_dataset(cfg).x.shape == (30, 3, 6, 6)


@pytest.mark.parametrize("arrays, fragment", [
    (dict(y=np.zeros(3, dtype=int)), "missing array 'x'"),
    (dict(x=np.zeros((3, 4, 4)), y=np.zeros(4, dtype=int)), "'y' has shape"),
    (dict(x=np.zeros((3, 4, 4)), y=np.zeros(3)), "integer labels"),
    (dict(x=np.zeros((3, 5, 4, 4)), y=np.zeros(3, dtype=int)), "C = 1 or 3"),
    (dict(x=np.full((3, 4, 4), 2.0), y=np.arange(3)), "must lie in [0, 1]"),
    (dict(x=np.zeros((3, 4, 4)), y=np.array([0, -1, 1])), "negative labels"),
])
def test_npz_loader_errors(tmp_path, arrays, fragment):
    with pytest.raises(ScenarioError) as exc:
        load_dataset(_npz(tmp_path, **arrays))
    assert fragment in str(exc.value) and "data.path" in str(exc.value)


def test_npz_missing_and_corrupt(tmp_path):
    with pytest.raises(ScenarioError, match="no such file"):
        load_dataset(_data(dataset="npz", path=str(tmp_path / "nope.npz")))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ScenarioError, match="not a readable .npz"):
        load_dataset(_data(dataset="npz", path=str(bad)))


def test_torchvision_dataset_missing_offline_names_directory(tmp_path):
    cfg = validate({"data": {"dataset": "cifar10", "data_dir": str(tmp_path)}}).data
    with pytest.raises(ScenarioError) as exc:
        load_dataset(cfg)
    msg = str(exc.value)
    assert str(tmp_path) in msg and "cifar-10-batches-py" in msg and "download = true" in msg
    assert not any(tmp_path.iterdir())  # nothing downloaded


# --- dataset = "imagefolder" -------------------------------------------------------------

def _imagefolder(tmp_path, image_size=0):
    return _data(dataset="imagefolder", path=str(tmp_path / "imgs"), image_size=image_size)


def test_imagefolder_loads_exact_pixels_labels_and_order(tmp_path):
    from PIL import Image

    root = tmp_path / "imgs"
    rng = np.random.default_rng(0)
    pix = {}
    for cls in ("zebra", "ant", "cat"):  # class order = sorted names, not creation order
        for name in ("b.png", "a.png"):
            pix[cls, name] = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
            write_png(root / cls / name, pix[cls, name])
    flat = np.broadcast_to(np.array([200, 100, 50], np.uint8), (6, 6, 3))
    Image.fromarray(np.ascontiguousarray(flat)).save(root / "cat" / "c.JPEG")  # lossy
    (root / "ant" / "notes.txt").write_text("ignored")
    write_png(root / "ant" / ".hidden.png", np.zeros((6, 6), np.uint8))
    write_png(root / ".cache" / "x.png", np.zeros((6, 6), np.uint8))
    (root / "loose.png").write_bytes(b"")  # not in a class folder: ignored
    ds = load_dataset(_imagefolder(tmp_path))
    assert ds.name == "imgs" and ds.classes == ("ant", "cat", "zebra")
    assert ds.x.shape == (7, 3, 6, 6) and ds.x.dtype == np.float32
    assert ds.y.dtype == np.int64 and ds.y.tolist() == [0, 0, 1, 1, 1, 2, 2]
    order = [("ant", "a.png"), ("ant", "b.png"), ("cat", "a.png"), ("cat", "b.png"),
             None, ("zebra", "a.png"), ("zebra", "b.png")]
    for i, key in enumerate(order):
        if key is not None:
            assert np.array_equal(ds.x[i], pix[key].transpose(2, 0, 1) / np.float32(255.0))
    assert np.abs(ds.x[4] - flat.transpose(2, 0, 1) / 255.0).max() < 0.05  # the JPEG
    assert np.array_equal(load_dataset(_imagefolder(tmp_path)).x, ds.x)  # deterministic


def test_imagefolder_grayscale_gives_one_channel_and_image_size_resizes(tmp_path):
    root = tmp_path / "imgs"
    for i, cls in enumerate(("a", "b")):
        write_png(root / cls / "0.png", np.full((6, 6), 51 * i, np.uint8))
        write_png(root / cls / "1.png", np.full((9, 4), 255, np.uint8))
    ds = load_dataset(_imagefolder(tmp_path, image_size=5))
    assert ds.x.shape == (4, 1, 5, 5)
    assert np.allclose(ds.x[2], 0.2) and np.allclose(ds.x[3], 1.0)


def test_imagefolder_mixed_sizes_need_image_size(tmp_path):
    root = tmp_path / "imgs"
    write_png(root / "a" / "0.png", np.zeros((6, 6), np.uint8))
    write_png(root / "b" / "0.png", np.zeros((8, 6), np.uint8))
    with pytest.raises(ScenarioError) as exc:
        load_dataset(_imagefolder(tmp_path))
    msg = str(exc.value)
    assert "data.path" in msg and "data.image_size" in msg and "\n" not in msg
    assert "6x6" in msg and "6x8" in msg and "0.png" in msg


def test_imagefolder_empty_class_is_named(tmp_path):
    root = tmp_path / "imgs"
    write_png(root / "a" / "0.png", np.zeros((6, 6), np.uint8))
    (root / "empty").mkdir()
    (root / "empty" / "readme.txt").write_text("no images")
    with pytest.raises(ScenarioError, match=r"data.path = .*class folder 'empty' has no image"):
        load_dataset(_imagefolder(tmp_path))
    (root / "empty" / "bad.png").write_bytes(b"not an image")  # all unreadable: still empty
    with pytest.raises(ScenarioError, match=r"class folder 'empty' has no readable image"):
        load_dataset(_imagefolder(tmp_path))


def test_imagefolder_skips_corrupt_files_with_a_warning(tmp_path, caplog):
    root = tmp_path / "imgs"
    for cls in ("a", "b"):
        write_png(root / cls / "0.png", np.full((6, 6), 7, np.uint8))
    (root / "a" / "1.png").write_bytes(b"not an image")
    with caplog.at_level("WARNING", logger="fedaudit"):
        ds = load_dataset(_imagefolder(tmp_path))
    assert ds.x.shape == (2, 1, 6, 6) and ds.y.tolist() == [0, 1]
    assert any("skipped 1 unreadable" in r.getMessage() and r.name == "fedaudit"
               for r in caplog.records)


def test_imagefolder_path_errors(tmp_path):
    with pytest.raises(ScenarioError, match=r"data.path = .*no such folder"):
        load_dataset(_data(dataset="imagefolder", path=str(tmp_path / "nope")))
    f = tmp_path / "file.png"
    f.write_bytes(b"x")
    with pytest.raises(ScenarioError, match=r"data.path = .*not a folder"):
        load_dataset(_data(dataset="imagefolder", path=str(f)))
    write_png(tmp_path / "imgs" / "only" / "0.png", np.zeros((6, 6), np.uint8))
    with pytest.raises(ScenarioError, match=r"needs at least 2"):
        load_dataset(_imagefolder(tmp_path))


def test_imagefolder_requires_path_in_schema(tmp_path):
    from fedaudit.config import load_scenario

    p = tmp_path / "s.toml"
    p.write_text("[data]\ndataset = 'imagefolder'\n")
    with pytest.raises(ScenarioError, match="data.path is required when data.dataset = "
                                            "'imagefolder'"):
        load_scenario(str(p))
    with pytest.raises(ScenarioError, match="image_size"):
        validate({"data": {"dataset": "imagefolder", "path": "x", "image_size": -1}})


def test_imagefolder_scenario_passes_preflight(tmp_path):
    from fedaudit.config.preflight import validate_all

    rng = np.random.default_rng(1)
    for i in range(40):
        write_png(tmp_path / "imgs" / f"c{i % 2}" / f"{i:02d}.png",
             rng.integers(0, 256, (8, 8), dtype=np.uint8))
    p = tmp_path / "s.toml"
    p.write_text(f"[scenario]\nname = 'imgs'\n[data]\ndataset = 'imagefolder'\n"
                 f"path = '{(tmp_path / 'imgs').as_posix()}'\nimage_size = 6\n"
                 "[federation]\nnum_clients = 2\n")
    s = validate_all(str(p))
    assert s.data.dataset == "imagefolder" and s.data.image_size == 6
