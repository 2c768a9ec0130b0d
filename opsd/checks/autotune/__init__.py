"""The auto-tuner: `max_rows_per_partition` and `dyn_batch_size` of running queries, tuned through their tuning
documents (collect -> evaluate -> decide -> apply)."""
