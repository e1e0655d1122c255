"""The membership attacks (attacks/), the oracle, the ROC metrics (fedaudit.metrics), the
reference models and the reference protocol."""
