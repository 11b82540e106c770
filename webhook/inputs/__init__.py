"""What every command builds before it runs, built one way: the Kubernetes client
(``inputs.kube``), the watch lists of the kinds in ``webhook.kinds`` (``inputs.watches``), the
CRD registry and the policy set (``inputs.policies``). The commands keep their flags and their
output; the setup reads typed values, never an argparse Namespace: each command's ``run(args)``
builds one frozen configuration from its flags (``Settings``, ``ControllerConfig``,
``ValidateConfig``, ``AuditConfig``, ``SuitesConfig``), which refuses a bad flag with a one-line
error that ``run`` prints (exit 2). The cluster a command reads (``--kubeconfig``, ``--context``,
``--cluster``) is a ``KubeClientConfig`` (``inputs.kube``); what policies to load, a
``PolicySource`` (``inputs.policies``), loaded by ``PolicySet.load`` with its actions checked
against the policies' names before anything compiles.

The submodules are imported by who needs them (the kubernetes client is not loaded by
``infergate validate`` unless it reads a cluster).
"""
