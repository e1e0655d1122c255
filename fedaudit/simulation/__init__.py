"""Flower apps and the simulation runner (the only fedaudit modules that touch Flower)."""
