"""One module per step kind: create, poll (status reads and deadlines), cancel, collect."""
