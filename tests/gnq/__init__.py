"""Gradient uniqueness (fedaudit.gnq): ghost kernels against the naive reference,
precision, the auditor."""
