"""What kube-apiserver does with a custom resource: decode, prune, default, validate.

    registry = CRDRegistry.load(paths)            # or CRDRegistry.shipped() (the bundled CRDs)
    outcome = registry.handle("CREATE", obj)      # Outcome(allowed, code, status, warnings, object, errors)
    outcome = registry.handle("UPDATE", obj, old, "status", request=RequestPath(...))

``handle`` gives the apiserver's answer to one write (verdict, ``metav1.Status``, warnings,
the stored object); ``prepare`` (decode) and ``validate`` are its two phases, between which
the admission chain runs mutating webhooks. ``str(FieldError)`` is the apiserver's text.
"""

from webhook.schema.fielderrors import FieldError, Outcome
from webhook.schema.registry import CRDLoadError, CRDRegistry, RequestError, RequestPath

__all__ = ["CRDRegistry", "CRDLoadError", "RequestError", "RequestPath", "Outcome", "FieldError"]
