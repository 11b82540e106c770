"""End-to-end tests against a real cluster: ``INFERGATE_E2E=1 KUBECONFIG=... pytest tests/e2e``.

Everything here talks to the cluster in ``KUBECONFIG`` through the official ``kubernetes``
client (and ``kubectl`` for what kubectl prints), sets the cluster up from the project's own
artefacts (the bundled CRDs, ``infergate serve``/``webhook-config``/``controller`` or the Helm
chart, ``examples/state``) and leaves it as it found it. Without the two variables the
tests are deselected (see :mod:`e2e.selection`).
"""
