"""Hydra-configured experiment runner for neural models on tabular data."""

__version__ = "0.1.0"
