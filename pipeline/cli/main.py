"""The ``crawler`` command: local stack, seeding, running, inspecting.

    crawler local up|down|status     the emulators (Pub/Sub, Bigtable, GCS) on loopback ports
    crawler flink up|down|status     a local Flink session cluster (JobManager + TaskManager)
    crawler seed URL... [--file F]   publish crawl requests to the frontier topic
    crawler run [options]            run the streaming pipeline (locally by default)
    crawler show URL                 a URL's webtable row and WARC location
    crawler ls --host HOST           a host's URLs with status and fetch time
    crawler status                   where the crawl stands (URLs by status, quiescence)
    crawler crawl [URL...]           all of the above in one go (the demo site without URLs)
    crawler explain URL              why a URL would or would not be crawled
    crawler provision --project P    topics, subscription, Bigtable tables, bucket (idempotent)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from pipeline.local import stack as stack_mod
from transforms.formats.schema import (
    DEFAULT_INSTANCE,
    DEFAULT_SUBSCRIPTION,
    DEFAULT_TOPIC,
    HOSTS_TABLE,
    WEBTABLE,
)


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir) if args.state_dir else stack_mod.default_state_dir()


def _use_local_stack(args: argparse.Namespace) -> stack_mod.LocalStack | None:
    """Points the client libraries at the local stack if it is up; returns it."""
    stack = stack_mod.load_local_stack(_state_dir(args))
    if stack is not None:
        os.environ.update(stack.env())
    return stack


def local_pipeline_args(stack: stack_mod.LocalStack, argv: list[str]) -> list[str]:
    """Defaults that aim a run at the local stack; flags the user gave win."""
    given = {a.split("=", 1)[0].replace("-", "_") for a in argv if a.startswith("--")}
    defaults = {
        "--project": stack.project,
        "--input_subscription": f"projects/{stack.project}/subscriptions/{stack.subscription}",
        "--frontier_topic": f"projects/{stack.project}/topics/{stack.topic}",
        "--bigtable_instance": stack.instance,
        "--warc_prefix": f"gs://{stack.bucket}/warc",
    }
    extra = [f"{k}={v}" for k, v in defaults.items() if k.replace("-", "_") not in given]
    return extra + argv


def cmd_local(args: argparse.Namespace) -> int:
    state_dir = _state_dir(args)
    if args.action == "up":
        stack = stack_mod.start_local_stack(state_dir)
        print(f"local stack up (state: {state_dir / 'local.json'}); to use it from a shell:")
        print(stack.export_lines())
    elif args.action == "down":
        stopped = stack_mod.stop_local_stack(state_dir)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    else:
        running = stack_mod.load_local_stack(state_dir)
        print(running.export_lines() if running else "local stack is not running")
        return 0 if running else 1
    return 0


def cmd_flink(args: argparse.Namespace) -> int:
    from pipeline.local import flink_cluster
    from pipeline.local.flink_dist import FlinkDistError

    state_dir = _state_dir(args)
    try:
        if args.action == "up":
            print(flink_cluster.start_cluster(state_dir).describe())
        elif args.action == "down":
            stopped = flink_cluster.stop_cluster(state_dir)
            print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        elif args.action == "kill-taskmanager":  # a failure drill; `up` starts a new one
            cluster = flink_cluster.load_cluster(state_dir)
            if cluster is None:
                raise flink_cluster.FlinkClusterError("no Flink cluster is running")
            print(f"killed the TaskManager (pid {cluster.kill_taskmanager()})")
        else:
            running = flink_cluster.load_cluster(state_dir)
            print(running.describe() if running else "the Flink cluster is not running")
            return 0 if running else 1
    except (flink_cluster.FlinkClusterError, FlinkDistError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_seed(args: argparse.Namespace) -> int:
    from pipeline.ops.seeding import publish_seeds

    urls = list(args.urls)
    if args.file:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        urls += [line.strip() for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
    if not urls:
        print("no URLs given (pass URLs or --file FILE)", file=sys.stderr)
        return 2
    stack = _use_local_stack(args)
    project = args.project or (stack.project if stack else None)
    topic = args.topic or (stack.topic if stack else DEFAULT_TOPIC)
    if not project:
        print("no --project and no local stack running (crawler local up)", file=sys.stderr)
        return 2
    report = publish_seeds(urls, project, topic, depth=args.depth, priority=args.priority)
    for url, reason in report.invalid:
        print(f"rejected {url!r}: {reason}", file=sys.stderr)
    print(f"published {report.published_urls} URLs for {report.hosts} hosts in "
          f"{report.messages} messages to projects/{project}/topics/{topic}")
    return 0 if report.published_urls else 1


def _local_flink(beam_argv: list[str]) -> bool:
    """FlinkRunner on this machine (embedded, or a local cluster): it reads the local stack."""
    from pipeline.main import is_embedded_flink, is_local_flink_cluster
    from pipeline.options import CrawlerOptions

    options = CrawlerOptions(beam_argv)
    return is_embedded_flink(options) or is_local_flink_cluster(options)


def cmd_run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    from pipeline.main import run

    stack = _use_local_stack(args)
    runner_given = any(a.startswith("--runner") for a in beam_argv)
    if stack is not None and (not runner_given or _local_flink(beam_argv)):
        beam_argv = local_pipeline_args(stack, beam_argv)
    elif not runner_given:
        print("the local stack is not running: start it with `crawler local up`, or pass "
              "--runner DataflowRunner and real resources", file=sys.stderr)
        return 2
    try:
        summary = run(beam_argv)
    except ValueError as exc:
        print(f"invalid options: {exc}", file=sys.stderr)
        return 2
    failed = getattr(summary, "failed", None)
    return 1 if failed else 0


def _bigtable_target(args: argparse.Namespace) -> tuple[str, str, str]:
    stack = _use_local_stack(args)
    project = args.project or (stack.project if stack else None)
    if not project:
        raise SystemExit("no --project and no local stack running (crawler local up)")
    return project, args.instance or (stack.instance if stack else DEFAULT_INSTANCE), args.table


def cmd_show(args: argparse.Namespace) -> int:
    from pipeline.ops.webtable import format_row, read_url

    row = read_url(args.url, *_bigtable_target(args))
    if row is None:
        print(f"no row for {args.url}", file=sys.stderr)
        return 1
    print(format_row(row))
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    from pipeline.ops.webtable import format_listing, list_host

    print(format_listing(list_host(args.host, *_bigtable_target(args), limit=args.limit)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Where the crawl stands, from its tables; exit status 0 when it is quiescent."""
    from pipeline.ops.status import format_status, read_status, status_json

    project, instance, _ = _bigtable_target(args)
    state = read_status(project, instance, args.table, args.hosts_table, args.horizon)
    print(status_json(state) if args.json else format_status(state))
    return 0 if state.quiescent else 3


def cmd_crawl(args: argparse.Namespace, beam_argv: list[str]) -> int:
    from pipeline.cli.crawl import crawl

    return crawl(args, beam_argv, _state_dir(args))


def cmd_explain(args: argparse.Namespace) -> int:
    from pipeline.ops.explain import run_explain

    return run_explain(args.url, policy_file=args.policy, robots_file=args.robots_file,
                       user_agent=args.user_agent, depth=args.depth, priority=args.priority,
                       as_json=args.json)


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
          f"  --bigtable_instance={args.instance}\n"
          f"  --warc_prefix=gs://{bucket}/warc")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawler", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", help="where the local stack keeps its state "
                        "(default: $CRAWLER_HOME or ./.crawler)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    local = sub.add_parser("local", help="start/stop the local Google Cloud emulators")
    local.add_argument("action", choices=["up", "down", "status"])

    flink = sub.add_parser("flink", help="start/stop a local Flink session cluster for "
                           "--runner=FlinkRunner --flink_master=127.0.0.1:PORT")
    flink.add_argument("action", choices=["up", "down", "status", "kill-taskmanager"])

    seed = sub.add_parser("seed", help="publish URLs to the frontier topic")
    seed.add_argument("urls", nargs="*")
    seed.add_argument("--file", help="file with one URL per line ('-' for stdin)")
    seed.add_argument("--priority", type=int, default=0, help="higher is fetched first")
    seed.add_argument("--depth", type=int, default=0, help="depth to record for the seeds")
    seed.add_argument("--project", help="Google Cloud project (default: the local stack's)")
    seed.add_argument("--topic", help=f"frontier topic (default: {DEFAULT_TOPIC})")

    sub.add_parser("run", help="run the pipeline; other flags go to CrawlerOptions and Beam",
                   add_help=False)

    for name, helptext in (("show", "print a URL's webtable row"),
                           ("ls", "list a host's URLs")):
        p = sub.add_parser(name, help=helptext)
        if name == "show":
            p.add_argument("url")
        else:
            p.add_argument("--host", required=True, help="e.g. example.com or 127.0.0.2:8081")
            p.add_argument("--limit", type=int, default=50)
        p.add_argument("--project")
        p.add_argument("--instance")
        p.add_argument("--table", default=WEBTABLE)

    status = sub.add_parser("status", help="where the crawl stands, read from its tables: "
                            "URLs by status, hosts active and waiting, the oldest queued URL, "
                            "whether it is quiescent (exit status 0) or not (3)")
    status.add_argument("--project")
    status.add_argument("--instance")
    status.add_argument("--table", default=WEBTABLE)
    status.add_argument("--hosts-table", default=HOSTS_TABLE)
    status.add_argument("--horizon", type=float, default=60.0,
                        help="recrawls due within this many seconds count as work "
                             "(default: 60)")
    status.add_argument("--json", action="store_true", help="print one JSON object")

    crawl = sub.add_parser("crawl", help="local stack + (demo site) + seed + run + summary; "
                           "other flags go to the pipeline")
    crawl.add_argument("urls", nargs="*", help="seed URLs (default: the bundled demo site)")
    crawl.add_argument("--demo-hosts", type=int, default=3)
    crawl.add_argument("--demo-pages", type=int, default=80)
    crawl.add_argument("--keep-stack", action="store_true",
                       help="leave the emulators running afterwards (for show/ls)")

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
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command in ("run", "crawl"):
        handler = cmd_run if args.command == "run" else cmd_crawl
        code = handler(args, rest)
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    else:
        handlers = {"local": cmd_local, "seed": cmd_seed, "show": cmd_show, "ls": cmd_ls,
                    "explain": cmd_explain, "provision": cmd_provision, "status": cmd_status,
                    "flink": cmd_flink}
        try:
            code = handlers[args.command](args)
        except stack_mod.LocalStackError as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = 2
    return code


if __name__ == "__main__":
    sys.exit(main())
