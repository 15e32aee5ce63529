"""qcat evaluation: metrics, segmentation, golden-data harness and reports."""
