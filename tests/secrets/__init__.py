"""Planted secrets (fedaudit.secrets, fedaudit.data.secrets): exposure, extraction,
planting."""
