"""The health check: the stalled-query watchdog (no progress within k trigger intervals while data waits)."""
