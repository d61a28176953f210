"""What the ``crawler`` commands share: the state directory, the local stack they aim at, and
the Bigtable target of the commands that read tables."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipeline.local import stack as stack_mod
from transforms.formats.schema import DEFAULT_INSTANCE


def state_dir(args: argparse.Namespace) -> Path:
    """``--state-dir``, else ``$CRAWLER_HOME``, else ``./.crawler``."""
    return Path(args.state_dir) if args.state_dir else stack_mod.default_state_dir()


def use_local_stack(args: argparse.Namespace) -> stack_mod.LocalStack | None:
    """Points the client libraries at the local stack if it is up; returns it."""
    stack = stack_mod.load_local_stack(state_dir(args))
    if stack is not None:
        os.environ.update(stack.env())
    return stack


def bigtable_target(args: argparse.Namespace) -> tuple[str, str, str]:
    """(project, instance, table) from the flags, else the local stack's."""
    stack = use_local_stack(args)
    project = args.project or (stack.project if stack else None)
    if not project:
        raise SystemExit("no --project and no local stack running (crawler local up)")
    return project, args.instance or (stack.instance if stack else DEFAULT_INSTANCE), args.table


def add_table_flags(parser: argparse.ArgumentParser, table: str) -> None:
    parser.add_argument("--project", help="Google Cloud project (default: the local stack's)")
    parser.add_argument("--instance", help="Bigtable instance (default: the local stack's)")
    parser.add_argument("--table", default=table, help=f"the table (default: {table})")
