"""The status controller: pure reconcilers (snapshot -> status), the placement planner,
the runner that writes status to a cluster, and ``infergate reconcile`` offline."""
