"""The malicious server's attack: an imprint block in front of the model it sends (Fowl et
al. 2022, "Robbing the Fed"), whose update -- one client's or the aggregate of many, secure
aggregation's included -- holds exact copies of the samples it separates.

* :mod:`~attacks.imprint.block`: the block, its Gaussian-quantile thresholds, the model
  the server sends;
* :mod:`~attacks.imprint.recover`: the samples read from the block's update, and the
  expected share of a round's samples recovered.
"""

from __future__ import annotations

from attacks.imprint.block import (BLOCK_BIAS, BLOCK_WEIGHT, ImprintBlock, block_update,
                                   gaussian_thresholds, imprint_block_for, imprinted)
from attacks.imprint.recover import expected_recovery_rate, recover_images, strongest_candidates

__all__ = ["BLOCK_BIAS", "BLOCK_WEIGHT", "ImprintBlock", "block_update",
           "expected_recovery_rate", "gaussian_thresholds", "imprint_block_for", "imprinted",
           "recover_images", "strongest_candidates"]
