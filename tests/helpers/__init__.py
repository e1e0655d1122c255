"""Code the tests share (no tests here): paths, results without timings, fixed oracles,
fake runs, generated plays, the Opacus reference, plug-ins written outside the package."""
