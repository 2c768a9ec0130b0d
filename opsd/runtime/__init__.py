"""Running pipelines: the pipeline builder, the supervisor, the daemon, `attach` (monitor) and their lifecycle."""
