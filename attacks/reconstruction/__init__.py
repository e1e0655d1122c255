"""The gradient-inversion family: what does the server rebuild of a client's training
images from its update?

An attack of this family gets an :class:`attacks.update_case.UpdateCase` (the start model,
the update, what the server knows of the local training) and returns a
:class:`~attacks.reconstruction.registry.Reconstruction` of the client's samples
(``fn(case, *, num_samples, labels, budget, seed, **options)``, registered in
:data:`RECONSTRUCTIONS` with :func:`register_reconstruction`).

* :mod:`~attacks.reconstruction.registry`: :data:`RECONSTRUCTIONS`, :class:`Budget`,
  :class:`Reconstruction`;
* :mod:`~attacks.reconstruction.simulate`: the gradient or unrolled local-SGD update the
  server expects from dummy data (:class:`UpdateSimulator`);
* :mod:`~attacks.reconstruction.matching_losses`: cosine and squared-L2 distances between
  updates, total variation;
* :mod:`~attacks.reconstruction.trials`: argument checks, seeding of restarts, joint soft
  labels, keeping the best restart;
* the attacks, one module each: :mod:`~attacks.reconstruction.inverting_gradients`
  (Geiping et al. 2020), :mod:`~attacks.reconstruction.dlg` (Zhu et al. 2019).

Importing the package imports every public module in it, so an attack registers itself
with its ``@register_reconstruction`` decorator.  The metrics of a reconstruction against
the client's true samples are not here: :mod:`fedaudit.image_metrics`.
"""

from __future__ import annotations

from attacks.reconstruction.registry import (RECONSTRUCTIONS, Budget, Reconstruction,
                                             get_reconstruction, reconstruction_names,
                                             register_reconstruction)
from attacks.reconstruction.simulate import UpdateSimulator
from fedaudit.registry import import_submodules

__all__ = ["Budget", "RECONSTRUCTIONS", "Reconstruction", "UpdateSimulator",
           "get_reconstruction", "reconstruction_names", "register_reconstruction"]

import_submodules(__name__, __path__, first=("inverting_gradients", "dlg"))
RECONSTRUCTIONS.mark_builtin()
