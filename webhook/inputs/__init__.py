"""What every command builds before it runs, built one way: the Kubernetes client
(``inputs.kube``), the watch lists of the kinds in ``webhook.kinds`` (``inputs.watches``), the
CRD registry and the policy set (``inputs.policies``). The commands keep their flags and their
output; the setup reads typed values, never an argparse Namespace.

The submodules are imported by who needs them (the kubernetes client is not loaded by
``infergate validate`` unless it reads a cluster).
"""
