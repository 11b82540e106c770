"""What kube-apiserver does with a custom resource: decode, prune, default, validate.

``CRDRegistry.handle`` gives the apiserver's answer to one write (verdict, Status, warnings,
the stored object); ``prepare`` and ``validate`` are its two phases for the admission chain.
"""

from webhook.schema.fielderrors import FieldError, Outcome
from webhook.schema.registry import CRDLoadError, CRDRegistry, RequestError, RequestPath

__all__ = ["CRDRegistry", "CRDLoadError", "RequestError", "RequestPath", "Outcome", "FieldError"]
