"""The scenario (fedaudit.scenario, fedaudit.config): schema, overrides, validation, the
command line's promises and the Python API's registries."""
