"""What opsd keeps on the cluster across restarts: the decision history (`history`)."""
