"""An oracle with fixed answers, for attacks tested on hand-computed probabilities."""


class FixedOracle:
    """An oracle that returns fixed probabilities: row ``x[i]`` of ``proba`` for sample i
    (the tests pass row indices as samples), counting queries like the real one."""

    def __init__(self, proba):
        import numpy as np

        self.proba = np.asarray(proba, dtype=np.float64)
        self.queries = 0

    def predict_proba(self, x):
        import numpy as np

        self.queries += len(x)
        return self.proba[np.asarray(x, dtype=int)]
