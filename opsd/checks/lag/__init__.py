"""The lag check: per partition unread rows and lag in seconds, per query the time to drain its backlog."""
