"""The audit after training (fedaudit.audit): target kinds and the attacker's positions,
what a stage writes, the middle layer extended from outside the package."""
