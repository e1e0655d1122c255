"""The classroom labs (labs/, fedaudit.labs): notebooks built from one source, the checks
and the mistakes they name, the challenge's grading and leaderboard.  The notebooks
themselves run in e2e/."""
