"""The attacks (attacks/): membership inference (the oracle, Res-MIA, the baselines, the
reference attacks and their protocol, the ROC metrics of fedaudit.metrics) and what the
server holds of a client's round for the attacks on updates (attacks.update_case)."""
