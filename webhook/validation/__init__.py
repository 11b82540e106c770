"""Kubernetes' own string checks, written once: names and labels as apimachinery validates them
(``names``) and the OpenAPI string formats of kube-openapi's strfmt registry (``strfmt``).

Pure functions with no dependencies inside infergate, shared by the schema engine
(``webhook.schema``) and the CEL ``format`` library (``webhook.cel.library.format``).
"""
