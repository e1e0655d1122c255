"""DP auditing with one run (fedaudit.dp_audit): the bounds, the canaries, the levels."""
