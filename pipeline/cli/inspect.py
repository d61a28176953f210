"""``crawler show``, ``ls``, ``status`` and ``explain``: reading what the crawl knows."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pipeline.cli.common import add_table_flags, bigtable_target, use_local_stack
from transforms.formats.schema import DEFAULT_INSTANCE, HOSTS_TABLE, WEBTABLE


def register(sub: Any) -> None:
    show = sub.add_parser("show", help="print a URL's webtable row")
    show.add_argument("url")
    add_table_flags(show, WEBTABLE)
    show.set_defaults(handler=cmd_show)
    listing = sub.add_parser("ls", help="list a host's URLs")
    listing.add_argument("--host", required=True, help="e.g. example.com or 127.0.0.2:8081")
    listing.add_argument("--limit", type=int, default=50)
    add_table_flags(listing, WEBTABLE)
    listing.set_defaults(handler=cmd_ls)
    status = sub.add_parser("status", help="where the crawl stands, read from its tables: "
                            "URLs by status, hosts active and waiting, the oldest queued URL, "
                            "whether it is quiescent (exit status 0) or not (3)")
    add_table_flags(status, WEBTABLE)
    status.add_argument("--hosts-table", default=HOSTS_TABLE)
    status.add_argument("--horizon", type=float, default=60.0,
                        help="recrawls due within this many seconds count as work "
                             "(default: 60)")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(handler=cmd_status)
    explain = sub.add_parser("explain", help="why a URL would or would not be crawled: "
                             "canonical form, keys, policy, filters, robots.txt, priority")
    explain.add_argument("url")
    explain.add_argument("--policy", help="policy file, .yaml/.yml/.json (default: built-in)")
    explain.add_argument("--robots-file", help="decide with this robots.txt instead of "
                         "fetching the host's")
    explain.add_argument("--user-agent", help="the crawl's user agent; its product token is "
                         "matched in robots.txt (default: beam-crawler/0.1)")
    explain.add_argument("--depth", type=int, default=0, help="link depth (default: 0, a seed)")
    explain.add_argument("--priority", type=int, default=0,
                         help="request priority (default: 0)")
    explain.add_argument("--json", action="store_true", help="print one JSON object")
    explain.add_argument("--project", help="the crawl's project, for the rules its hosts "
                         "learned (default: the local stack's, if it is up)")
    explain.add_argument("--instance", help="Bigtable instance (default: the local stack's)")
    explain.add_argument("--hosts-table", default=HOSTS_TABLE)
    explain.set_defaults(handler=cmd_explain)


def cmd_show(args: argparse.Namespace) -> int:
    from pipeline.ops.webtable import format_row, read_url

    row = read_url(args.url, *bigtable_target(args))
    if row is None:
        print(f"no row for {args.url}", file=sys.stderr)
        return 1
    print(format_row(row))
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    from pipeline.ops.webtable import format_listing, list_host

    print(format_listing(list_host(args.host, *bigtable_target(args), limit=args.limit)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Where the crawl stands, from its tables; exit status 0 when it is quiescent."""
    from pipeline.ops.status import format_status, read_status, status_json

    project, instance, _ = bigtable_target(args)
    state = read_status(project, instance, args.table, args.hosts_table, args.horizon)
    print(status_json(state) if args.json else format_status(state))
    return 0 if state.quiescent else 3


def cmd_explain(args: argparse.Namespace) -> int:
    from pipeline.ops.explain import run_explain
    from pipeline.ops.learned_rules import hosts_table_rules

    rules_of = None
    stack = use_local_stack(args)
    if args.project or stack is not None:  # a crawl to ask: the rules its hosts learned
        project = args.project or (stack.project if stack else "")
        rules_of = hosts_table_rules(project, args.instance or (
            stack.instance if stack else DEFAULT_INSTANCE), args.hosts_table)
    return run_explain(args.url, policy_file=args.policy, robots_file=args.robots_file,
                       user_agent=args.user_agent, depth=args.depth, priority=args.priority,
                       as_json=args.json, rules_of=rules_of)
