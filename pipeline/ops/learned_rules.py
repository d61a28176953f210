"""What ``crawler explain`` adds from the running crawl: the DUST rules the URL's key learned
(``transforms.core.dust``), read from the hosts table (``h:url_rules``), and what they make
of the URL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transforms.core.dust import adopted_rules, rewrite
from transforms.formats.rows import url_rules_from_host_cells
from transforms.formats.schema import HOST_FAMILY, HOSTS_TABLE

RulesOf = Callable[[str], tuple[str, ...]]


def hosts_table_rules(project: str, instance: str, table: str = HOSTS_TABLE) -> RulesOf:
    """A reader of a key's saved rules from the crawl's hosts table."""
    from google.cloud import bigtable
    from google.cloud.bigtable import row_filters

    client = bigtable.Client(project=project, admin=False)
    hosts = client.instance(instance).table(table)

    def read(key: str) -> tuple[str, ...]:
        row = hosts.read_row(key.encode(), filter_=row_filters.CellsColumnLimitFilter(1))
        if row is None:
            return ()
        cells = {column.decode(): values[0].value.decode("utf-8", "replace")
                 for column, values in row.cells.get(HOST_FAMILY, {}).items()}
        return url_rules_from_host_cells(cells)
    return read


def learned_section(canonical: str, rules: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """The JSON fields and the text lines of the learned-rules section."""
    rewritten = rewrite(canonical, adopted_rules(rules))
    doc = {"learned_rules": list(rules),
           "rewritten_by_rules": rewritten if rewritten != canonical else None}
    lines = ["", "learned rules    " + (", ".join(rules) if rules else
                                       "none (from duplicate content; see README, DUST)")]
    if rewritten != canonical:
        lines.append(f"  a discovered link to it is fetched as {rewritten}")
    return doc, lines
