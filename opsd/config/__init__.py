"""The `opsd run CONFIG.yaml` configuration: models (every key described), loading, durations, Spark defaults."""
