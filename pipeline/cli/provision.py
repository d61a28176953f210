"""``crawler provision``: the crawler's resources in a real project, idempotently."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from transforms.formats.schema import (
    DEFAULT_INSTANCE,
    DEFAULT_NOTIFICATIONS_TOPIC,
    DEFAULT_SUBSCRIPTION,
    DEFAULT_TOPIC,
)


def register(sub: Any) -> None:
    provision = sub.add_parser(
        "provision", help="create the crawler's Pub/Sub, Bigtable and GCS resources in a "
                          "project; safe to run again")
    provision.add_argument("--project", required=True, help="Google Cloud project id")
    provision.add_argument("--zone", help="zone of a new Bigtable instance's cluster, "
                                          "e.g. us-central1-b (needed to create the instance)")
    provision.add_argument("--nodes", type=int, default=1,
                           help="nodes of a new Bigtable cluster (default: 1)")
    provision.add_argument("--location", help="location of a new bucket, e.g. US-CENTRAL1 "
                                              "(default: the service's, US)")
    provision.add_argument("--instance", default=DEFAULT_INSTANCE,
                           help=f"Bigtable instance id (default: {DEFAULT_INSTANCE})")
    provision.add_argument("--topic", default=DEFAULT_TOPIC,
                           help=f"frontier topic id (default: {DEFAULT_TOPIC})")
    provision.add_argument("--subscription", default=DEFAULT_SUBSCRIPTION,
                           help=f"the pipeline's subscription (default: {DEFAULT_SUBSCRIPTION})")
    provision.add_argument("--bucket", help="bucket for WARC files (default: PROJECT-crawler)")
    provision.set_defaults(handler=cmd_provision)


def cmd_provision(args: argparse.Namespace) -> int:
    """Creates the crawler's resources in a real project (or wherever the ``*_EMULATOR_HOST``
    variables point), idempotently, with the code ``crawler local up`` uses."""
    from pipeline.ops import resources
    bucket = args.bucket or f"{args.project}-crawler"
    try:
        done = resources.ensure_all(args.project, args.instance, args.topic, args.subscription,
                                    bucket, cluster_zone=args.zone,
                                    cluster_nodes=args.nodes, location=args.location)
    except resources.ResourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(done))
    print("\npipeline flags:\n"
          f"  --project={args.project}\n"
          f"  --input_subscription=projects/{args.project}/subscriptions/{args.subscription}\n"
          f"  --frontier_topic=projects/{args.project}/topics/{args.topic}\n"
          f"  --notifications_topic=projects/{args.project}/topics/"
          f"{DEFAULT_NOTIFICATIONS_TOPIC}\n"
          f"  --bigtable_instance={args.instance}\n"
          f"  --warc_prefix=gs://{bucket}/warc")
    return 0
