"""The doctor: a one-shot diagnosis of streaming queries, built from the checks' collect + evaluate (never apply)."""
