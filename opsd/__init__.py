"""opsd: the operations daemon for Spark Structured Streaming over YTsaurus queues."""

__version__ = "0.1.0"
