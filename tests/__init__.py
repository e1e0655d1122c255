"""fedaudit's tests: one folder per package area (unit tests, no Flower run), the runs
through the real Flower + Ray path in ``e2e/`` (marked ``e2e`` by its conftest), the code
they share in ``helpers/``."""
