"""The two controllers of the framework benchmark (ours and kopf) and the kind they reconcile."""
