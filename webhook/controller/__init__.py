"""The status controller: pure reconcilers (snapshot -> status, also run offline by
``infergate reconcile``), the placement planner, the runner that writes status to a cluster,
the background audit's loop and report writes, and the generated native policies kept in the
cluster."""
