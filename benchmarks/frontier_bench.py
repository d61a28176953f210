"""The frontier's per-element cost: what ``HostFrontier.process`` does for one element (a batch
of one host's URLs), in process and without the runner: read the host's state (unpickle the
host record and queue, load the seen-URL Bloom filter from bytes), ``HostCore.accept`` (dedup,
filters, budget, queue), write the state back (pickle, Bloom filter to bytes).

    python -m benchmarks.frontier_bench --repeat 3 --out results/frontier.json

The URLs are the test-bed corpus links (``benchmarks.stages``) spread over ``--hosts`` hosts,
every link sent twice (the second time the seen filter drops it), in elements of
``--batch`` URLs, which is how discovered links reach the frontier (``BatchLinksByHost``).
The runner's own cost per element comes on top; the end-to-end benchmark measures the whole.
"""

from __future__ import annotations

import pickle
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from benchmarks.stages import corpus_pages, corpus_parser, repetitions, timed, write_results
from transforms.bloom import ScalableBloomFilter
from transforms.hostcore import FrontierConfig, HostCore, HostState
from transforms.links import extract_html
from transforms.policy import HostPolicy, Policy
from transforms.records import CrawlRequest
from transforms.schedule import FrontierQueue

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


def run_elements(items: Sequence[tuple[str, list[CrawlRequest]]]) -> tuple[int, Counter[str]]:
    """Processes every element as the DoFn does, state kept as the runner keeps it: bytes.
    Returns the URLs handled and the frontier's counters (accepted, dedup_dropped, ...)."""
    counters: Counter[str] = Counter()
    store: dict[str, tuple[bytes | None, bytes | None, bytes | None]] = {}
    now = time.time()
    for host, requests in items:
        host_blob, queue_blob, seen_blob = store.get(host, (None, None, None))
        core = HostCore(CONFIG, pickle.loads(host_blob) if host_blob else HostState(host),
                        pickle.loads(queue_blob) if queue_blob else
                        FrontierQueue(CONFIG.queue_capacity),
                        ScalableBloomFilter.from_bytes(seen_blob) if seen_blob
                        else CONFIG.new_seen(), book_loader=lambda: None)
        core.accept(requests, now)
        counters.update(core.counters)
        store[host] = (pickle.dumps(core.state), pickle.dumps(core.queue),
                       core.seen.to_bytes() if core.seen_changed else seen_blob)
    return sum(len(r) for _, r in items), counters


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = corpus_parser(__doc__ or "", "results/frontier.json")
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args(argv)
    pages = corpus_pages(args)
    links = sorted({link for url, body in pages for link in extract_html(body, url).links})
    items = elements(links, args.hosts, args.batch)
    urls = timed(lambda: run_elements(items)[0], repetitions(args))
    counters = run_elements(items)[1]
    per_element = len(items) / sum(len(r) for _, r in items)
    result = {"links": len(links), "hosts": args.hosts, "batch": args.batch,
              "elements": len(items), "accepted": counters["urls_accepted"],
              "dedup_dropped": counters["dedup_dropped"],
              "filtered": sum(n for k, n in counters.items() if k.startswith("filtered_")),
              "urls_per_s": {k: round(v, 1) for k, v in urls.items()},
              "elements_per_s": {k: round(v * per_element, 1) for k, v in urls.items()}}
    print(f"{len(links):,} links over {args.hosts} hosts, each twice, {len(items):,} elements "
          f"of up to {args.batch} URLs:\n  frontier DoFn body: "
          f"{result['elements_per_s']['median']:,.0f} elements/s, "
          f"{result['urls_per_s']['median']:,.0f} URLs/s (median of "
          f"{repetitions(args)})")
    write_results(args.out, result)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
