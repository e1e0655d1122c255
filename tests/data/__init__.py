"""Data (fedaudit.data): splits, partitioners, loaders, canaries, text."""
