"""The apiserver's limit on a request body, applied to each document offline.

kube-apiserver reads at most ``MaxRequestBodyBytes`` (3 MiB, ``k8s.io/apiserver/pkg/server/config.go``)
of a create or update; a larger body is refused before it is decoded (``limitedReadBody`` in
``k8s.io/apiserver/pkg/endpoints/handlers/rest.go``), whatever its kind: 413
``Request entity too large: limit is 3145728``. Offline, the body is the document as
``kubectl create`` sends it: compact JSON, written as Go's ``encoding/json`` writes it (``<``,
``>`` and ``&`` as ``\\u003c``..., U+2028 and U+2029 escaped).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024


def body_size(obj: Any) -> int:
    """The bytes of ``obj`` as a request body (compact JSON, Go's HTML-safe escapes)."""
    try:
        data = orjson.dumps(obj)
    except TypeError:  # integers beyond 64 bits, keys that are not strings
        data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str).encode()
    escaped = data.count(b"<") + data.count(b">") + data.count(b"&")
    separators = data.count("\u2028".encode()) + data.count("\u2029".encode())
    return len(data) + 5 * escaped + 3 * separators


def too_large_status(obj: Any, limit: int = MAX_REQUEST_BODY_BYTES) -> dict[str, Any] | None:
    """The apiserver's 413 when ``obj`` is over ``limit`` as a request body, else None."""
    if body_size(obj) <= limit:
        return None
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"Request entity too large: limit is {limit}", "reason": "RequestEntityTooLarge",
            "code": 413}
