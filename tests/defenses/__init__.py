"""Defenses (fedaudit.defenses, strategies/defenses.py): DP-SGD, the Flower DP wrappers,
clipping, accounting, GNQ on clipped gradients."""
