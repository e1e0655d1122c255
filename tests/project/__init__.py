"""The repository as a whole: import layering and module sizes, packaging, and the
experiments/ and bench/ scripts."""
