"""qcat training: click-log ingestion, datasets, simulation, augmentation and trainers."""
