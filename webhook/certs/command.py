"""``infergate certs``: create, renew or show the certificates in a directory."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

from webhook.certs.bundle import CertBundle, CertError, not_after, subject_alt_names, utcnow
from webhook.certs.issuing import serving_sans
from webhook.certs.rotation import RotationPolicy, plan
from webhook.certs.stores import DirectoryStore

CERTS_EXAMPLES = """\
infergate certs generate --dir certs --service ns/name     # create, or renew when due (the CA first)
infergate certs generate --dir certs --san webhook.example --force
infergate certs show --dir certs                           # what they are and when they expire
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webhook import command_line

    parser.epilog = command_line.epilog(CERTS_EXAMPLES, exit_codes="""\
exit status:
  0  done
  2  usage error, or certificates that cannot be read or written (said in one line)""")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=command_line.Parser)
    gen = sub.add_parser("generate", help="create or renew the CA and serving certificate in a directory")
    gen.add_argument("--dir", type=Path, default=Path("certs"), help="where to write ca.crt, ca.key, tls.crt, tls.key (default: certs)")
    gen.add_argument("--service", help="NAMESPACE/NAME of the webhook's Service: its DNS names go into the SANs")
    gen.add_argument("--san", action="append", default=[], help="an extra DNS name or IP address (repeatable)")
    gen.add_argument("--force", action="store_true", help="start over with a new CA even when valid certificates exist")
    show = sub.add_parser("show", help="print what the certificates in a directory are and when they expire")
    show.add_argument("--dir", type=Path, default=Path("certs"), help="where the certificates are (default: certs)")


def run(args: argparse.Namespace) -> int:
    from webhook import command_line

    store = DirectoryStore(args.dir)
    try:
        current = store.load()
        if args.action == "show":
            if current is None:
                return command_line.error(f"certs: no certificates in {args.dir}")
            print(describe(current))
            return 0
        sans = serving_sans(args.service, args.san)
        result = plan(None if args.force else current, now=utcnow(), sans=sans, policy=RotationPolicy())
        if result.changed:
            store.save(result.bundle)
        for action in result.actions or ("certificates are valid; nothing to do",):
            print(action)
        print(describe(result.bundle))
        print(f"caBundle (base64): {base64.b64encode(result.bundle.ca_pem()).decode('ascii')}")
        return 0
    except (CertError, ValueError) as exc:
        return command_line.error(f"certs: {exc}")


def describe(bundle: CertBundle) -> str:
    lines = [f"serving certificate: {', '.join(subject_alt_names(bundle.cert))} (expires {not_after(bundle.cert):%Y-%m-%d %H:%M} UTC)"]
    for ca in bundle.trusted:
        role = "signer" if ca == bundle.signer else "previous"
        lines.append(f"CA ({role}): {ca.subject.rfc4514_string()} (expires {not_after(ca):%Y-%m-%d %H:%M} UTC)")
    return "\n".join(lines)
