"""``kfstack alert-receiver``: Alertmanager's webhook receiver that turns a firing
``KfstackLiveDrift`` alert into one retraining run (:mod:`kfstack.app.alert_receiver`), on the
KFP API of a cluster or, with ``--local``, as embedded runs on this machine."""

from __future__ import annotations

import argparse
import datetime
import logging
import re
import sys

from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import DEFAULT_PIPELINE_ROOT, Subparsers, writable_dir
from kfstack.app.cli.parameters import parse_params
from kfstack.errors import UsageError

DEFAULT_PORT = 9095
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, flag: str) -> datetime.timedelta:
    """``90``, ``90s``, ``30m``, ``6h``, ``1d`` as a duration.

    Raises:
        UsageError: Anything else (naming ``flag``).
    """
    match = _DURATION.match(text.strip())
    if not match:
        raise UsageError(f"{flag} {text!r}: expected a duration such as 6h, 30m or 900 (seconds)")
    return datetime.timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "alert-receiver",
        help="receive Alertmanager's webhook: a firing KfstackLiveDrift alert starts one retraining run",
        epilog="Alertmanager posts to http://ADDRESS:PORT/alerts with http_config.authorization "
        "(credentials_file: the same token). On a cluster the model's retraining is its enabled "
        "recurring run whose serving_name is the alert's inference_service and whose runs launch into "
        "the alert's namespace (its launch_namespace, else its own namespace), searched in the "
        "--namespace(s) on a multi-user KFP, for alerts of the --namespace(s) on a standalone one; "
        "with --local, what --retrain names. One decision per alert is logged "
        "as a JSON line on stderr. docs/retraining.md, 'From a drift alert'.",
    )
    parser.add_argument(
        "--token-file",
        required=True,
        metavar="FILE",
        help="file holding the bearer token Alertmanager sends (a mounted Secret; read at each request)",
    )
    parser.add_argument("--address", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)"
    )
    parser.add_argument(
        "--cooldown",
        default="6h",
        help="after a run an alert started, no other alert starts one for that model for this long "
        "(default 6h; 30m, 900 seconds)",
    )
    parser.add_argument(
        "--stale-after",
        default="24h",
        help="a run of the model not ended this long after its start (stuck pending, a lost pod, an "
        "unknown state; embedded: a run directory without summary.json) no longer blocks a new one, "
        "and the decision says so (default 24h)",
    )
    parser.add_argument(
        "--no-force",
        dest="force",
        action="store_false",
        help="start runs without force=true: the pipeline's own batch drift check then decides "
        "whether to retrain",
    )
    parser.add_argument(
        "--host",
        help="cluster: the KFP API's URL (default: what kfp.Client finds; in a pod, the cluster's "
        "ml-pipeline service with the pod's projected service-account token)",
    )
    parser.add_argument(
        "--kfp-token-file",
        metavar="FILE",
        help="cluster: file holding a bearer token for the KFP API, read at each decision (a rotating "
        "projected token works); default: kfp.Client's own",
    )
    parser.add_argument(
        "--namespace",
        dest="namespaces",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help="cluster, required (repeatable): on a multi-user KFP, a namespace whose recurring runs "
        "retrain models, whichever namespace their runs launch into; on a standalone KFP, a namespace "
        "whose alerts this receiver acts on (an alert of another is refused and logged). An alert "
        "without a namespace label is refused",
    )
    parser.add_argument("--local", action="store_true", help="start embedded runs on this machine")
    parser.add_argument(
        "--retrain",
        action="append",
        default=[],
        metavar="SERVICE=PIPELINE",
        help="--local: the pipeline that retrains served model SERVICE (repeatable)",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="--local: an argument of every run started (repeatable; checked against each pipeline)",
    )
    parser.add_argument(
        "--pipeline-root",
        default=None,
        help=f"--local: where the runs' directories are (default {DEFAULT_PIPELINE_ROOT})",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kfstack.app.alert_receiver.cluster import KfpRetraining
    from kfstack.app.alert_receiver.decisions import Receiver, Retraining
    from kfstack.app.alert_receiver.embedded import LocalRetraining, RetrainingRecord
    from kfstack.app.alert_receiver.server import AlertReceiverServer
    from kfstack.app.alert_receiver.tokens import read_token
    from kfstack.app.cli.run import local_arguments

    cooldown = parse_duration(args.cooldown, "--cooldown")
    stale_after = parse_duration(args.stale_after, "--stale-after")
    retraining: Retraining
    if args.local:
        if args.host or args.kfp_token_file or args.namespaces:
            raise UsageError(
                "--host, --kfp-token-file, --namespace: for a cluster's KFP API; drop them with --local"
            )
        if not args.retrain:
            raise UsageError("--local: name what retrains each model: --retrain SERVICE=PIPELINE")
        records = {}
        for pair in args.retrain:
            service, sep, pipeline = pair.partition("=")
            if not (sep and service and pipeline):
                raise UsageError(f"--retrain {pair!r}: expected SERVICE=PIPELINE")
            if service in records:
                raise UsageError(f"--retrain {service}: given twice")
            records[service] = RetrainingRecord(pipeline, parse_params(args.param, pipeline))
        root = writable_dir(args.pipeline_root or DEFAULT_PIPELINE_ROOT)
        retraining = LocalRetraining(records, root, local_arguments, force=args.force)
        where = f"embedded runs under {root}"
    else:
        if args.retrain or args.param or args.pipeline_root:
            raise UsageError("--retrain, --param, --pipeline-root: only with --local")
        if args.kfp_token_file:
            read_token(args.kfp_token_file, "--kfp-token-file")  # unreadable: stop the start
        retraining = KfpRetraining(
            args.host, namespaces=args.namespaces, token_file=args.kfp_token_file, force=args.force
        )
        where = (
            f"runs on the KFP API at {args.host or 'the default host'} for namespace(s) "
            f"{', '.join(retraining.namespaces)}"
        )
    logging.getLogger("kfstack.app.alert_receiver").setLevel(logging.INFO)
    receiver = Receiver(retraining, cooldown, stale_after=stale_after)
    server = AlertReceiverServer(receiver, args.token_file, args.address, args.port)
    print(
        f"kfstack alert-receiver: listening on http://{args.address}:{server.port}/alerts -- {where}, "
        f"cooldown {cooldown}, stale after {stale_after}; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK
