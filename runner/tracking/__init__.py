"""Experiment tracking: MLflow runs for runs and sweeps (logger=mlflow)."""
