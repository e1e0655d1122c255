"""Where the tests find the repository and the shared data, from any folder below tests/."""

from pathlib import Path

#: the repository's root (the checkout: labs/, scenarios/, experiments/, README.md)
ROOT = Path(__file__).resolve().parents[2]
#: ../shared/data beside the checkout: copies of MNIST, CIFAR-10 and tiny shakespeare that
#: some tests use when present (never a download in a test)
SHARED_DATA = ROOT.parent / "shared" / "data"
