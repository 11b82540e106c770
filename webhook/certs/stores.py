"""Where the certificate files live: a directory (``certs/`` locally, or a mounted Secret, whose
kubelet symlink swap :class:`FileWatcher` notices) or a Secret in the cluster."""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.certs.bundle import (
    CA_FILE, CA_KEY_FILE, CERT_FILE, FILES, KEY_FILE, CertBundle, CertConflict, CertError)


@dataclass
class DirectoryStore:
    """``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` in a directory (``certs/`` or a mount).

    ``signing=False``: files managed elsewhere (a cert-manager Secret has no ``ca.key``)."""

    path: Path
    signing: bool = True

    def read_files(self) -> dict[str, bytes]:
        files = {}
        for name in FILES:
            try:
                files[name] = (self.path / name).read_bytes()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise CertError(f"cannot read {self.path / name}: {exc.strerror}") from None
        return files

    def load(self) -> CertBundle | None:
        files = self.read_files()
        return CertBundle.from_files(files, signing=self.signing) if files else None

    def save(self, bundle: CertBundle) -> None:
        """Write every file atomically (keys first, owner-only)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            files = bundle.to_files()
            for name in (n for n in (CA_KEY_FILE, KEY_FILE, CA_FILE, CERT_FILE) if n in files):
                _atomic_write(self.path / name, files[name], private=name.endswith(".key"))
        except OSError as exc:
            raise CertError(f"cannot write certificates to {self.path}: {exc.strerror}") from None


def _atomic_write(path: Path, data: bytes, *, private: bool) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileWatcher:
    """Notices when files change, including the kubelet's ``..data`` symlink swap.

    A mounted Secret is ``tls.crt -> ..data/tls.crt`` with ``..data -> ..2024_..._xyz``;
    an update writes a new timestamped directory and renames a new ``..data`` over the old
    one, so the file's *path* never changes. The fingerprint therefore follows every
    symlink and records the resolved target with its inode, size and mtime.
    """

    def __init__(self, paths: Iterable[Path]):
        self.paths = tuple(paths)
        self._last = self.fingerprint()

    def fingerprint(self) -> tuple[Any, ...]:
        marks = []
        for path in self.paths:
            try:
                st = path.stat()
                marks.append((os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                marks.append((str(path), None))
        return tuple(marks)

    def changed(self) -> bool:
        current = self.fingerprint()
        if current == self._last:
            return False
        self._last = current
        return True


class SecretStore:
    """The certificates kept in a Secret (``type: kubernetes.io/tls`` plus the CA files).

    Uses the ``kubernetes`` client synchronously (run it in a thread); reads go through the
    raw JSON so nothing depends on the generated models. ``save`` is optimistic: it carries
    the ``resourceVersion`` it read, so two replicas rotating at once cannot both win.
    """

    def __init__(self, api_client: Any, namespace: str, name: str):
        from kubernetes.client import CoreV1Api

        self.core = CoreV1Api(api_client)
        self.namespace, self.name = namespace, name
        self._resource_version: str | None = None

    def load(self) -> CertBundle | None:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.core.read_namespaced_secret(self.name, self.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                self._resource_version = None
                return None
            raise CertError(f"cannot read Secret {self.namespace}/{self.name}: {exc.status} {exc.reason}") from None
        secret = api_json(resp)
        self._resource_version = secret.get("metadata", {}).get("resourceVersion")
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items() if k in FILES}
        return CertBundle.from_files(data) if data else None

    def save(self, bundle: CertBundle) -> None:
        from kubernetes.client.exceptions import ApiException

        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "type": "kubernetes.io/tls",
            "data": {k: base64.b64encode(v).decode("ascii") for k, v in bundle.to_files().items()},
        }
        try:
            if self._resource_version is None:
                resp = self.core.create_namespaced_secret(self.namespace, body, _preload_content=False)
            else:
                body["metadata"]["resourceVersion"] = self._resource_version
                resp = self.core.replace_namespaced_secret(self.name, self.namespace, body, _preload_content=False)
        except ApiException as exc:
            if exc.status == 409:
                raise CertConflict(f"Secret {self.namespace}/{self.name} was written by someone else meanwhile") from None
            raise CertError(f"cannot write Secret {self.namespace}/{self.name}: {exc.status} {exc.reason}") from None
        self._resource_version = api_json(resp).get("metadata", {}).get("resourceVersion")


def api_json(response: Any) -> dict[str, Any]:
    """The ``kubernetes`` client's raw answer (``_preload_content=False``) as JSON."""
    import orjson

    return orjson.loads(response.data)
