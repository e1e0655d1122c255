"""Shrink the images of an ``npz`` dataset file (the project's contract: ``x`` uint8
(N, H, W) or (N, C, H, W), ``y``, optional ``classes``) to side S by averaging S x S blocks
of H/S x W/S pixels, for ablations over the image size (docs/validation.md section 22:
where ``tv = "auto"`` switches).  H and W must be multiples of S.

    python experiments/downsample_npz.py ../shared/data/cifar10-jpeg-10k.npz 16 /tmp/cifar16.npz
"""

from __future__ import annotations

import argparse

import numpy as np


def downsample(x: np.ndarray, side: int) -> np.ndarray:
    """Block means of ``x`` (N, [C,] H, W) to (N, [C,] side, side), rounded back to uint8."""
    h, w = x.shape[-2:]
    if h % side or w % side:
        raise SystemExit(f"image size {h} x {w} is not a multiple of {side}")
    blocks = x.reshape(*x.shape[:-2], side, h // side, side, w // side).astype(np.float64)
    return np.rint(blocks.mean(axis=(-3, -1))).astype(np.uint8)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("side", type=int)
    ap.add_argument("dst")
    args = ap.parse_args(argv)
    with np.load(args.src, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["x"] = downsample(arrays["x"], args.side)
    np.savez(args.dst, **arrays)
    print(f"{args.dst}: x {arrays['x'].shape}")


if __name__ == "__main__":
    main()
