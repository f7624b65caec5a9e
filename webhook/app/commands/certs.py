"""`aiadmit certs generate|rotate|client`: the webhook's CA and serving certificate, and the API server's client
certificate for `serve --client-ca-file` (see webhook/app/certs.py).

`--inject FILE...` also writes the CA, base64, into `webhooks[*].clientConfig.caBundle`
of Validating/MutatingWebhookConfiguration documents in those files, in place;
ruamel.yaml round-trips the files so comments and layout survive.
"""

from __future__ import annotations

import os
import sys

from webhook.app.commands import missing_extra

WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def register(subparsers) -> None:
    parser = subparsers.add_parser("certs", help="generate or rotate the webhook's TLS certificates",
                                   description="Write ca.crt, ca.key, tls.crt and tls.key for the webhook.")
    actions = parser.add_subparsers(dest="certs_action", metavar="ACTION")
    for name, text in (("generate", "a new CA and serving pair"),
                       ("rotate", "a new serving pair from the existing CA (same caBundle)")):
        sub = actions.add_parser(name, help=text, description=text)
        sub.add_argument("--out", required=True, metavar="DIR", help="directory for the files")
        sub.add_argument("--service", metavar="NAME", help="Service name: adds its in-cluster DNS names")
        sub.add_argument("--namespace", metavar="NS", default="aiadmit-system",
                         help="the Service's namespace (default aiadmit-system)")
        sub.add_argument("--host", action="append", default=[], metavar="H",
                         help="extra DNS name or IP address (repeatable)")
        sub.add_argument("--inject", nargs="+", default=[], metavar="FILE",
                         help="write the CA into caBundle of the webhook configurations in these YAML files")
        sub.set_defaults(func=run)
    text = "a CA for the API server's webhook client certificate, and that certificate (serve --client-ca-file)"
    sub = actions.add_parser("client", help=text, description=text)
    sub.add_argument("--out", required=True, metavar="DIR", help="directory for client-ca.crt/.key, client.crt/.key")
    sub.add_argument("--name", default="kube-apiserver", help="the certificate's common name (default kube-apiserver)")
    sub.set_defaults(func=run_client)
    parser.set_defaults(func=lambda args: (parser.print_help(sys.stderr), 2)[1])


def run(args) -> int:
    missing = missing_extra("certs", "webhook", ("cryptography",))
    if missing is not None:
        return missing
    from webhook.app import certs  # cryptography: imported by the command that needs it, not by every aiadmit start

    hosts = certs.service_names(args.service, args.namespace) + list(args.host)
    try:
        if args.certs_action == "generate":
            if not hosts:
                print("error: give --service NAME (and --namespace) or --host H", file=sys.stderr)
                return 2
            paths = certs.generate(args.out, hosts)
        else:
            paths = certs.rotate(args.out, hosts or None)
        injected = [inject(path, certs.ca_bundle(paths["ca.crt"])) for path in args.inject]
    except (certs.CertError, InjectError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc.filename or args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    for name in ("ca.crt", "tls.crt", "tls.key") if args.certs_action == "rotate" else certs.FILES:
        print(f"wrote {paths[name]}")
    for path, count in zip(args.inject, injected):
        print(f"injected caBundle into {count} webhook(s) in {path}")
    return 0


def run_client(args) -> int:
    missing = missing_extra("certs", "webhook", ("cryptography",))
    if missing is not None:
        return missing
    from webhook.app import certs

    try:
        paths = certs.generate_client(args.out, args.name)
    except OSError as exc:
        print(f"error: {exc.filename or args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    for name in certs.CLIENT_FILES:
        print(f"wrote {paths[name]}")
    return 0


class InjectError(Exception):
    pass


def inject(path: str, bundle: str) -> int:
    """Set caBundle on every webhook of every webhook configuration in `path`; returns how many."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    try:
        with open(path, encoding="utf-8") as handle:
            documents = list(yaml.load_all(handle))
    except OSError as exc:
        raise InjectError(f"{path}: {exc.strerror}") from None
    except YAMLError as exc:
        raise InjectError(f"{path}: not valid YAML: {exc}") from None
    count = 0
    for index, doc in enumerate(documents):
        if not isinstance(doc, dict) or doc.get("kind") not in WEBHOOK_KINDS:
            continue
        webhooks = doc.get("webhooks")
        if not isinstance(webhooks, list):
            raise InjectError(f"{path}: document {index + 1} ({doc.get('kind')}): webhooks must be a list")
        for position, hook in enumerate(webhooks):
            config = hook.get("clientConfig") if isinstance(hook, dict) else None
            if not isinstance(config, dict):
                raise InjectError(f"{path}: document {index + 1}: webhooks[{position}].clientConfig must be a map")
            config["caBundle"] = bundle
            count += 1
    if not count:
        raise InjectError(f"{path}: no Validating/MutatingWebhookConfiguration with webhooks found")
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        yaml.dump_all(documents, handle)
    os.replace(tmp, path)
    return count
