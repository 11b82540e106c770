"""Kubernetes' own admission policies, offline: ValidatingAdmissionPolicy,
MutatingAdmissionPolicy and their bindings (``admissionregistration.k8s.io/v1``) read beside
AdmissionPolicy files and evaluated exactly as kube-apiserver v1.36 evaluates them.

One job per module: ``model`` (the objects, their defaults and API checks), ``loader`` (files ->
compiled :class:`NativePolicies`), ``expressions`` (their CEL: variables, lazy composition, the
apiserver's error words; a mutation's with the patch types of ``webhook.cel.mutation``),
``matching`` (matchConstraints and matchResources), ``params`` (paramRef in the cluster view),
``validating`` (the validating plugin's answer to one request: :func:`evaluate`,
:func:`forbidden_status`), ``mutating`` (the mutating plugin's: :func:`mutate`, reinvocation),
``patching`` (a mutation's patch applied: structured merge, JSON patch).

Public seams: ``load_native(directory, evaluator)`` / ``load_documents(docs, evaluator)``,
``evaluate(policies, attributes, cluster)`` and ``mutate(policies, attributes, cluster, schema,
reinvocation)``.
"""
