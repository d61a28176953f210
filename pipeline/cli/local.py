"""``crawler local`` (the emulators) and ``crawler flink`` (a local Flink session cluster)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pipeline.cli.common import state_dir
from pipeline.local import stack as stack_mod


def register(sub: Any) -> None:
    local = sub.add_parser("local", help="start/stop the local Google Cloud emulators")
    local.add_argument("action", choices=["up", "down", "status"])
    local.set_defaults(handler=cmd_local)
    flink = sub.add_parser("flink", help="start/stop a local Flink session cluster for "
                           "--runner=FlinkRunner --flink_master=127.0.0.1:PORT")
    flink.add_argument("action", choices=["up", "down", "status", "kill-taskmanager"])
    flink.set_defaults(handler=cmd_flink)


def cmd_local(args: argparse.Namespace) -> int:
    where = state_dir(args)
    if args.action == "up":
        stack = stack_mod.start_local_stack(where)
        print(f"local stack up (state: {where / 'local.json'}); to use it from a shell:")
        print(stack.export_lines())
    elif args.action == "down":
        stopped = stack_mod.stop_local_stack(where)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    else:
        running = stack_mod.load_local_stack(where)
        print(running.export_lines() if running else "local stack is not running")
        return 0 if running else 1
    return 0


def cmd_flink(args: argparse.Namespace) -> int:
    from pipeline.local import flink_cluster
    from pipeline.local.flink_dist import FlinkDistError

    where = state_dir(args)
    try:
        if args.action == "up":
            print(flink_cluster.start_cluster(where).describe())
        elif args.action == "down":
            stopped = flink_cluster.stop_cluster(where)
            print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        elif args.action == "kill-taskmanager":  # a failure drill; `up` starts a new one
            cluster = flink_cluster.load_cluster(where)
            if cluster is None:
                raise flink_cluster.FlinkClusterError("no Flink cluster is running")
            print(f"killed the TaskManager (pid {cluster.kill_taskmanager()})")
        else:
            running = flink_cluster.load_cluster(where)
            print(running.describe() if running else "the Flink cluster is not running")
            return 0 if running else 1
    except (flink_cluster.FlinkClusterError, FlinkDistError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
