"""The decision history: every tuner, heal and replan decision that changed (or would change) something, or was
refused as unsafe, kept in a table on the cluster so that after a restart one can still say why a cap is what it is.
`table` defines the table once, `decide` picks the entries worth keeping (pure), `apply` appends them (never fatal to
the job), `collect` reads them back (`opsd history`)."""
