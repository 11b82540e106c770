"""Certificates change under a live server while reviews flow: zero failed requests."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import ssl

import aiohttp

from webhook import certs

from .conftest import ScriptedAdmitter, review, served_certificate, start_server, stop_server, wait_for

MODEL = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "a"}, "spec": {}}


class Apiserver:
    """Trusts the caBundle it was last given, ``lag`` seconds after each injection."""

    def __init__(self, ca_pem: bytes, lag: float):
        self.ca_pem, self.lag = ca_pem, lag
        self.trusted_versions = 1

    def inject(self, loop: asyncio.AbstractEventLoop, bundle: certs.CertBundle) -> None:
        loop.call_soon_threadsafe(loop.call_later, self.lag, self._learn, bundle.ca_pem())

    def _learn(self, ca_pem: bytes) -> None:
        if ca_pem != self.ca_pem:
            self.ca_pem = ca_pem
            self.trusted_versions += 1


async def probe_issuers(running, apiserver: Apiserver, stop: asyncio.Event, results: dict, issuers: set):
    """Handshakes as the apiserver would make them, recording who issued the served cert."""
    port = int(running.url.rsplit(":", 1)[1])
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=certs.client_context(apiserver.ca_pem), server_hostname="localhost")
            issuers.add(writer.get_extra_info("ssl_object").getpeercert()["issuer"])
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            ok = (await reader.read()).startswith(b"HTTP/1.1 200")
            writer.close()
            results["ok" if ok else "failed"] += 1
        except (OSError, ssl.SSLError) as exc:
            results["failed"] += 1
            results.setdefault("errors", []).append(repr(exc))
        await asyncio.sleep(0.02)


async def hammer(running, apiserver: Apiserver, stop: asyncio.Event, results: dict, *, fresh: bool):
    """Reviews in a loop: ``fresh`` makes a new TLS connection (full handshake) for each."""
    session, trusted = None, None
    while not stop.is_set():
        if session is None or trusted != apiserver.ca_pem:
            if session is not None:
                await session.close()
            trusted = apiserver.ca_pem
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=certs.client_context(trusted), force_close=fresh))
        try:
            async with session.post(running.url + "/validate", json=review(MODEL)) as resp:
                body = await resp.json()
                ok = resp.status == 200 and body["response"]["allowed"]
            results["ok" if ok else "failed"] += 1
        except (aiohttp.ClientError, OSError) as exc:
            results["failed"] += 1
            results.setdefault("errors", []).append(repr(exc))
    await session.close()


async def test_ca_rotation_under_load_fails_no_request(tmp_path, caplog):
    """The full staged rotation (new CA appended, serving cert moved, old CA removed),
    compressed into seconds, while new and kept-alive connections keep reviewing and the
    'apiserver' learns each caBundle half a second late."""
    policy = certs.RotationPolicy(
        ca_validity=dt.timedelta(seconds=9), serving_validity=dt.timedelta(seconds=9), renew_fraction=0.5,
        overlap=dt.timedelta(seconds=1), backdate=dt.timedelta(0),
    )
    loop = asyncio.get_running_loop()
    apiserver_box: list[Apiserver] = []
    running = await start_server(
        tmp_path, ScriptedAdmitter(), policy=policy,
        on_bundle=lambda b: apiserver_box and apiserver_box[0].inject(loop, b),
    )
    apiserver = Apiserver(running.ca_pem, lag=0.5)
    apiserver_box.append(apiserver)
    keeper_task = asyncio.create_task(
        running.keeper.run(check_interval=0.1, watch_interval=0.1, logger=logging.getLogger("infergate.certs")))
    stop = asyncio.Event()
    results = {"ok": 0, "failed": 0}
    issuers: set = set()
    with caplog.at_level(logging.INFO, logger="infergate.certs"):
        workers = [asyncio.create_task(hammer(running, apiserver, stop, results, fresh=i % 2 == 0))
                   for i in range(4)]
        workers.append(asyncio.create_task(probe_issuers(running, apiserver, stop, results, issuers)))
        try:
            for _ in range(120):  # the last stage lands ~6.5 s in
                await asyncio.sleep(0.1)
                if any("removed the previous CA" in r.getMessage() for r in caplog.records):
                    break
            await asyncio.sleep(0.6)
        finally:
            stop.set()
            await asyncio.gather(*workers)
            keeper_task.cancel()
            await running.runner.cleanup()
    stages = [r.getMessage() for r in caplog.records if r.getMessage().startswith("certificates: ")]
    assert stages[:3] == [
        "certificates: appended a new CA to the bundle",
        "certificates: serving certificate moved to the new CA",
        "certificates: removed the previous CA from the bundle",
    ], stages
    assert results["failed"] == 0, results["errors"][:3]
    assert results["ok"] > 50
    assert len(issuers) == 2  # requests were really served by certificates of both CAs
    assert apiserver.trusted_versions == 3  # old; old+new; new


async def test_serving_cert_replaced_on_disk_is_hot_reloaded(tmp_path):
    """Someone else (cert-manager, `infergate certs generate`) renews the files: the server
    picks up the new certificate without a restart; connections keep working."""
    store = certs.DirectoryStore(tmp_path / "certs")
    first = certs.plan(None, now=certs.utcnow(), sans=certs.serving_sans(), policy=certs.RotationPolicy()).bundle
    store.save(first)
    running = await start_server(tmp_path, ScriptedAdmitter(), manage=False)
    task = asyncio.create_task(running.keeper.run(check_interval=60, watch_interval=0.05,
                                                  logger=logging.getLogger("infergate.certs")))
    try:
        fresh_cert, fresh_key = certs.issue_serving(first.signer, first.ca_key, sans=certs.serving_sans(),
                                                    now=certs.utcnow(), validity=dt.timedelta(days=90))
        # caught mid-update: the new key is there, the certificate not yet
        (tmp_path / "certs" / "tls.key").write_bytes(certs.key_pem(fresh_key))
        await wait_for(lambda: running.keeper.error is not None)
        assert "tls.key does not belong to tls.crt" in running.keeper.error
        assert await served_certificate(running) == first.cert  # still serving the old one
        (tmp_path / "certs" / "tls.crt").write_bytes(certs.CertBundle(first.trusted, first.ca_key, fresh_cert, fresh_key).to_files()["tls.crt"])
        await wait_for(lambda: running.keeper.bundle.cert == fresh_cert and running.keeper.error is None)
        assert await served_certificate(running) == fresh_cert
        status, body = await running.post("/validate", review(MODEL))
        assert status == 200 and body["response"]["allowed"]
        async with running.sessions[0].get(running.url + "/metrics") as r:
            assert "infergate_certificate_reloads_total 1.0" in await r.text()
    finally:
        task.cancel()
        await stop_server(running)


async def test_cert_manager_layout_rsa_key_and_intermediate_chain_without_ca_key(tmp_path):
    """A cert-manager Secret: ``tls.crt`` = leaf + intermediate, an RSA ``tls.key``,
    ``ca.crt`` = the root, no ``ca.key``. A client trusting only the root verifies,
    because the intermediate is served with the leaf."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    now = certs.utcnow()

    def ca(name: str, signer=None, signer_key=None):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(signer.subject if signer else subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=5))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(signer_key or key, hashes.SHA256())
        )
        return cert, key

    root, root_key = ca("cert-manager root")
    intermediate, inter_key = ca("cert-manager intermediate", root, root_key)
    leaf_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf, _ = certs.issue_serving(intermediate, inter_key, sans=certs.serving_sans(), now=now,
                                  validity=dt.timedelta(days=1), key=leaf_key)
    pem = serialization.Encoding.PEM
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    (cert_dir / "tls.crt").write_bytes(leaf.public_bytes(pem) + intermediate.public_bytes(pem))
    (cert_dir / "tls.key").write_bytes(certs.key_pem(leaf_key))
    (cert_dir / "ca.crt").write_bytes(root.public_bytes(pem))

    running = await start_server(tmp_path, ScriptedAdmitter(), manage=False)
    try:
        assert running.keeper.bundle.ca_key is None and running.keeper.bundle.chain == (intermediate,)
        assert await served_certificate(running, root.public_bytes(pem)) == leaf
        status, body = await running.post("/validate", review(MODEL))
        assert status == 200 and body["response"]["allowed"]
        assert not (cert_dir / "ca.key").exists()  # nothing generated in someone else's directory
    finally:
        await stop_server(running)
