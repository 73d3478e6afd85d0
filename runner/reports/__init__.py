"""What a run shows people: evaluation plots, feature importance, report.html."""
