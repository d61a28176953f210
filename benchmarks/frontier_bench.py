"""The frontier's per-element cost: what ``HostFrontier.process`` does for one element (a batch
of one host's URLs), in process and without the runner: decode the key's ``host`` cell, admit
the URLs (``HostCore.on_element``: dedup against the seen filter, filters, budget), build their
``queued`` rows and index entries, and write back the cells the element changed
(``transforms.frontier.cells``: the ``host`` cell, the arrivals bag, at most one seen stage).

    python -m benchmarks.frontier_bench --repeat 3 --out results/frontier.json

The URLs are the test-bed corpus links (``benchmarks.stages``) spread over ``--hosts`` hosts,
every link sent twice (the second time the seen filter drops it), in elements of
``--batch`` URLs, which is how discovered links reach the frontier (``PublishLinks``).
Each key is rebuilt from an empty in-memory store first, as a new key is. Table writes are
built but go to an in-memory store; the runner's cost and the Bigtable round trips come on top
(the end-to-end benchmark measures the whole).
"""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from benchmarks.stages import corpus_pages, corpus_parser, repetitions, timed, write_results
from transforms.core.links import extract_html
from transforms.core.policy import HostPolicy, Policy
from transforms.core.records import CrawlRequest
from transforms.frontier.cells import FrontierCells, SeenCache, memory_cells
from transforms.frontier.context import FrontierConfig
from transforms.stores.memory import MemoryFrontierStore

CONFIG = FrontierConfig(policy=Policy(HostPolicy(min_delay=0.0, max_pages_per_host=1_000_000)))


def elements(links: Sequence[str], hosts: int, batch: int) -> list[tuple[str, list[CrawlRequest]]]:
    """(host, requests) elements: link i goes to host i % hosts; each link appears twice."""
    per_host: dict[str, list[CrawlRequest]] = defaultdict(list)
    for i, link in enumerate(links):
        host = f"h{i % hosts}.bench"
        parts = urlsplit(link)
        url = f"http://{host}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")
        per_host[host].append(CrawlRequest(url, 1, 0, f"http://{host}/"))
    out = []
    for host, requests in per_host.items():
        for copy in (requests, requests):
            out += [(host, copy[i:i + batch]) for i in range(0, len(copy), batch)]
    return out


def _ready(key: str, cells: FrontierCells, store: MemoryFrontierStore, now: float) -> None:
    """Rebuilds a new key from the (empty) store, as its first element does."""
    core = cells.core(CONFIG, key)
    fx = core.on_element((), (), now)
    cells.write(key, core, fx)
    assert fx.io is not None
    page = store.rebuild_page(key, None, CONFIG.rebuild_page, True, CONFIG.head_size, now)
    core = cells.core(CONFIG, key)
    fx = core.on_timer(lambda _: ("done", page), now)
    cells.write(key, core, fx)


def run_elements(items: Sequence[tuple[str, list[CrawlRequest]]]
                 ) -> tuple[int, Counter[str], int]:
    """Processes every element as the DoFn does, state kept as the runner keeps it: bytes.
    Returns the URLs handled, the frontier's counters, and the state bytes written."""
    counters: Counter[str] = Counter()
    store = MemoryFrontierStore()
    cells: dict[str, FrontierCells] = {}
    cache = SeenCache()
    now = time.time()
    written = 0
    for host, requests in items:
        if host not in cells:
            cells[host] = memory_cells(cache)
            _ready(host, cells[host], store, now)
        core = cells[host].core(CONFIG, host)
        fx = core.on_element(requests, (), now)
        written += cells[host].write(host, core, fx)
        counters.update(core.ctx.counters)
    return sum(len(r) for _, r in items), counters, written


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = corpus_parser(__doc__ or "", "results/frontier.json")
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args(argv)
    pages = corpus_pages(args)
    links = sorted({link for url, body in pages for link in extract_html(body, url).links})
    items = elements(links, args.hosts, args.batch)
    urls = timed(lambda: run_elements(items)[0], repetitions(args))
    _, counters, written = run_elements(items)
    per_element = len(items) / sum(len(r) for _, r in items)
    result = {"links": len(links), "hosts": args.hosts, "batch": args.batch,
              "elements": len(items), "accepted": counters["urls_accepted"],
              "dedup_dropped": counters["dedup_dropped"],
              "filtered": sum(n for k, n in counters.items() if k.startswith("filtered_")),
              "state_bytes_per_element": round(written / len(items)),
              "urls_per_s": {k: round(v, 1) for k, v in urls.items()},
              "elements_per_s": {k: round(v * per_element, 1) for k, v in urls.items()}}
    print(f"{len(links):,} links over {args.hosts} hosts, each twice, {len(items):,} elements "
          f"of up to {args.batch} URLs:\n  frontier DoFn body: "
          f"{result['elements_per_s']['median']:,.0f} elements/s, "
          f"{result['urls_per_s']['median']:,.0f} URLs/s (median of "
          f"{repetitions(args)}), {result['state_bytes_per_element']:,} state bytes written "
          "per element")
    write_results(args.out, result)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
