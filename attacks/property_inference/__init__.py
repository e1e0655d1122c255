"""Property inference from updates (Melis et al. 2019): does a client's update come from
data that holds a property -- a subpopulation that is not the label (bright images, say)?

The curious server holds auxiliary data labelled with the property.  For the model a
client started from, it computes the updates the client's local training would give on
auxiliary batches with and without the property, trains a classifier on them, and scores
the client's real update (:class:`~attacks.property_inference.registry.AuxiliaryUpdates`
in, one score out: higher means "holds the property").

* :mod:`~attacks.property_inference.registry`: the attacks (:data:`PROPERTY_ATTACKS`) and the
  properties (:data:`PROPERTIES`: a sample's inputs in, a bool per sample out);
* :mod:`~attacks.property_inference.bpc`: Melis et al.'s batch property classifier;
* :mod:`~attacks.property_inference.properties`: the built-in properties (brightness);
* :mod:`~attacks.property_inference.family`: the family of attacks on updates
  (``[property_inference]``, results.json ``property_inference``).

docs/algorithms.md section 20 gives the procedure, the choices and the measured numbers.
"""

from __future__ import annotations

from attacks.property_inference.registry import (PROPERTIES, PROPERTY_ATTACKS,
                                                 AuxiliaryUpdates, register_property,
                                                 register_property_attack)
from fedaudit.registry import import_submodules

__all__ = ["PROPERTIES", "PROPERTY_ATTACKS", "AuxiliaryUpdates", "register_property",
           "register_property_attack"]

import_submodules(__name__, __path__)
PROPERTY_ATTACKS.mark_builtin()
PROPERTIES.mark_builtin()
