"""``fedaudit matrix``: which attack survives which defense, at what cost, in one command.

For each defense (``[matrix] defenses``: presets of :mod:`fedaudit.defenses.presets`,
defense kinds or aggregation paths) the matrix runs the scenario under that defense --
membership inference from every position, the attacks on updates where the server sees
them -- and once per malicious server (``[matrix] servers``), and lays every defense's
threat-model matrix (:mod:`fedaudit.rundir.threat_matrix`) side by side in
``DIR/matrix.json`` and ``DIR/report.html``, beside each defense's test accuracy and
epsilon.

* :mod:`~fedaudit.defense_matrix.plan` -- the runs, validated before anything is written;
* :mod:`~fedaudit.defense_matrix.runner` -- the folder, running and resuming;
* :mod:`~fedaudit.defense_matrix.cells` -- matrix.json from the runs' results.json;
* :mod:`~fedaudit.defense_matrix.report` -- report.html;
* :mod:`~fedaudit.defense_matrix.commands` -- the command line.
"""

from fedaudit.defense_matrix.plan import MatrixPlan, MatrixRun, plan_matrix
from fedaudit.defense_matrix.runner import open_matrix_dir, run_matrix

__all__ = ["MatrixPlan", "MatrixRun", "open_matrix_dir", "plan_matrix", "run_matrix"]
