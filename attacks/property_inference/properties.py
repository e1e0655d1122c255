"""The built-in properties: subpopulations defined by the inputs alone, never the label."""

from __future__ import annotations

import numpy as np

from attacks.property_inference.registry import register_property
from fedaudit.options import option


@register_property("brightness", describe="bright images: mean pixel value above `above`",
                   options={"above": option(float, 0.6, "a sample has the property when "
                                            "its mean pixel value (all channels, [0, 1]) is "
                                            "above this", min=0.0, max=1.0)})
def brightness(x: np.ndarray, *, above: float = 0.6) -> np.ndarray:
    """``mean(x_i) > above`` per sample, over every channel and pixel."""
    x = np.asarray(x)
    return x.reshape(len(x), -1).mean(axis=1, dtype=np.float64) > above
