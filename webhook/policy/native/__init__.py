"""Kubernetes' own admission policies, offline: ValidatingAdmissionPolicy and
ValidatingAdmissionPolicyBinding (``admissionregistration.k8s.io/v1``) read beside
AdmissionPolicy files and evaluated exactly as kube-apiserver v1.36 evaluates them.

One job per module: ``model`` (the objects, their defaults and API checks), ``loader`` (files ->
compiled :class:`NativePolicies`), ``expressions`` (their CEL: variables, lazy composition, the
apiserver's error words), ``matching`` (matchConstraints and matchResources), ``params``
(paramRef in the cluster view), ``validating`` (the plugin's answer to one request:
:func:`evaluate`, :func:`forbidden_status`).

Public seams: ``load_native(directory, evaluator)`` / ``load_documents(docs, evaluator)`` and
``evaluate(policies, attributes, cluster)``.
"""
