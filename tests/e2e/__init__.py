"""End-to-end tests: scenarios through the real Flower + Ray path, Flower's deployment, a
Ray cluster, the lab notebooks.  conftest.py marks everything here ``e2e``."""
