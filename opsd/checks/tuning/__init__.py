"""The tuning check: the live-tuning values in force for each pipeline, as facts for `/status` and metrics."""
