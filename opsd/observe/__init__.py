"""Observing queries: the listener, plain events, batch progress, the recorder, the status store, readiness."""
