"""Image files written pixel by pixel, for the imagefolder loader."""

import numpy as np


def _png(path, arr):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(arr, dtype=np.uint8)).save(path)
