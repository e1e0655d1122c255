"""The terminal side of a run: progress bars (:mod:`~fedaudit.console.progress`) and a
clean Ctrl-C (:mod:`~fedaudit.console.interrupt`)."""
