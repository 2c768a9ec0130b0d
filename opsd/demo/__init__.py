"""The demo: the README's main job end to end on an embedded cluster (`opsd demo`, `make demo`)."""
