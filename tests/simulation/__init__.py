"""The simulation around Flower (fedaudit.simulation, strategies/auditing.py): the
auditing strategy's reply checks, the ClientApp's workspace and plug-ins, resume and
interrupt handling without a run."""
