"""qcat evaluation: metrics, golden-data harness and reports (the measures training shares are in measure)."""
