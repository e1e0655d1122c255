"""report.html and ``fedaudit compare`` on fake finished runs (the report of real runs:
e2e/)."""
