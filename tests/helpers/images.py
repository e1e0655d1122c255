"""Image files written pixel by pixel, for the imagefolder loader."""

import numpy as np


def write_png(path, arr):
    """``arr`` (uint8 pixels) as a PNG file at ``path``, its folders created."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(arr, dtype=np.uint8)).save(path)
