"""The peer: a generic Scrapy spider, configured the way a Scrapy user would for a polite crawl.

It follows every link its ``LinkExtractor`` finds, obeys robots.txt, stays on the seeds' hosts,
and keeps ``--concurrency`` requests per host with ``--delay`` seconds between them (Scrapy's
download slot per host; the delay is not randomized so that it is the same d ours gets).
Run as a separate process by ``benchmarks.e2e`` so that its CPU time and peak RSS are its own:

    python -m benchmarks.scrapy_run --delay 0 --concurrency 1 --max-pages 2000 URL...

Prints one JSON line with Scrapy's own stats at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import urlsplit

USER_AGENT = "scrapy-bench/2.19 (+loopback benchmark)"


def build_spider(seeds: list[str]) -> type:
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import CrawlSpider, Rule

    class GenericSpider(CrawlSpider):
        name = "generic"
        start_urls = seeds
        # hostnames only: Scrapy's offsite check compares hostnames, ports aside
        allowed_domains = sorted({urlsplit(u).hostname or "" for u in seeds})
        rules = (Rule(LinkExtractor(), follow=True),)

    return GenericSpider


def settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": USER_AGENT,
        "CONCURRENT_REQUESTS": max(16, args.concurrency * len(args.seeds)),
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "DOWNLOAD_DELAY": args.delay,
        "DOWNLOAD_DELAY_JITTER": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "CLOSESPIDER_PAGECOUNT": args.max_pages,
        "CLOSESPIDER_TIMEOUT": args.timeout,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "LOG_INSTALL_ROOT_HANDLER": True,
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", nargs="+")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--max-pages", type=int, default=0, help="0: no limit")
    parser.add_argument("--timeout", type=float, default=0, help="seconds; 0: no limit")
    args = parser.parse_args(argv)
    from scrapy.crawler import CrawlerProcess

    process = CrawlerProcess(settings(args))
    crawler = process.create_crawler(build_spider(args.seeds))
    process.crawl(crawler)
    process.start()
    stats = {k: (v.isoformat() if hasattr(v, "isoformat") else v)
             for k, v in (crawler.stats.get_stats() if crawler.stats else {}).items()}
    print(json.dumps({"scrapy_stats": stats}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
