"""Models and local training (fedaudit.models, fedaudit.training): builders, the
transformer, sequences, the chance-level warning."""
