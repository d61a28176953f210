"""Per-stage microbenchmarks: link extraction, canonicalization, robots decisions, per-link cost,
and the extract stage with the analysts' content (previews, main text, signatures).

    python -m benchmarks.stages [--corpus DIR ...] [--repeat 3] [--quick] [--out FILE]

The corpus is real HTML nobody here wrote: every ``*.html`` under ``/usr/share/doc`` (what the
machine's Debian packages ship) plus the demo site's pages. Each stage runs ``--repeat`` times
and reports the median and the range; peers run in the same process on the same inputs:
``w3lib.url.canonicalize_url`` always (a dependency of ours), Scrapy's ``LinkExtractor`` when
Scrapy is installed (``pip install scrapy``). Figures are per process, i.e. per core.

Targets (issue 4): link extraction >= 1,400 pages/s per core, canonicalization >= 150,000
URLs/s per core, per-link overhead <= 8 us. The end-to-end comparison with Scrapy is not here yet.

Issue 15 adds the extract stage as the pipeline runs it (``parse_page`` on a fetch result:
content-coding and charset decoding, one parse, links, robots directives, outlink requests,
preview, main text, word count, text digest):

* ``extract_content_pages_per_s``: that stage without MinHash signatures; target >= 1,000
  pages/s per core;
* ``signature_ms``: ``text_signature`` alone on each page's main text (the best of
  ``--repeat`` runs per page): the median page's cost, the mean and the largest; target
  <= 0.5 ms for the median page;
* ``extract_stage_pages_per_s``: the whole stage, signatures included.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.demo.pages import SiteSpec, build_responses
from transforms.core.digests import with_digest
from transforms.core.extraction import parse_page
from transforms.core.links import extract_html
from transforms.core.minhash import text_signature
from transforms.core.records import CrawlRequest, FetchResult
from transforms.core.robots import rules_from_response
from transforms.core.url_keys import politeness_key, url_fingerprint
from transforms.core.urls import InvalidUrl, canonicalize_url, url_parts

DOC_ROOT = Path("/usr/share/doc")
ROBOTS = b"""User-agent: *
Disallow: /private/
Disallow: /*.pdf$
Allow: /private/open/
Disallow: /search?
Crawl-delay: 1
"""
TARGETS = {"extract_pages_per_s": 1400.0, "canonical_urls_per_s": 150_000.0,
           "canonical_messy_urls_per_s": 150_000.0, "per_link_us": 8.0,
           "extract_content_pages_per_s": 1000.0, "signature_ms": 0.5}
LOWER_IS_BETTER = frozenset({"per_link_us", "signature_ms"})
USER_AGENT = "beam-crawler"


def load_corpus(roots: Sequence[Path], limit: int | None = None) -> list[tuple[str, bytes]]:
    """(URL, body) pairs: HTML files under ``roots`` (as http://docs.local/PATH) and the demo
    site's HTML pages."""
    pages: list[tuple[str, bytes]] = []
    for root in roots:
        for path in sorted(root.rglob("*.html")):
            if path.is_file():
                rel = path.relative_to(root).as_posix()
                pages.append((f"http://docs.local/{rel}", path.read_bytes()))
    spec = SiteSpec("bench", 200)
    for p, response in sorted(build_responses(spec, "http://demo.local").items()):
        if response.content_type.startswith("text/html"):
            pages.append((f"http://demo.local{p}", response.body))
    return pages[:limit] if limit else pages


def messy_variant(url: str) -> str:
    """``url`` as links are often written: upper-case scheme and host, an explicit default
    port, a dot segment, a tracking parameter and a fragment; it canonicalizes back to ``url``
    (less the tracking parameter). Links as found are mostly canonical already, which our fast
    path recognizes; these are not."""
    scheme, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    port = ":80" if scheme == "http" and ":" not in host else ""
    sep = "&" if "?" in path else "?"
    return f"{scheme.upper()}://{host.upper()}{port}/./{path}{sep}utm_source=feed#top"


def canonicalize_each(urls: Sequence[str],
                      canonicalize: Callable[[str], str] = canonicalize_url) -> int:
    """Canonicalizes every URL (an uncrawlable one counts too); returns how many."""
    for url in urls:
        try:
            canonicalize(url)
        except InvalidUrl:
            pass
    return len(urls)


def fetch_results(pages: list[tuple[str, bytes]]) -> list[FetchResult]:
    """The pages as the fetcher hands them to the extract stage: 200, text/html, the body as
    sent and its payload digest (which the fetch service computes, not this stage)."""
    return [with_digest(FetchResult(CrawlRequest(url), url.split("/", 3)[2], 0.0, url,
                                    status=200, content_type="text/html",
                                    headers=(("Content-Type", "text/html"),), body=body,
                                    content_length=len(body)))
            for url, body in pages]


def signature_costs(texts: Sequence[str], repeat: int) -> dict[str, float]:
    """Milliseconds to sign each text (the best of ``repeat`` runs of that text): the median
    over the texts, the mean and the largest."""
    costs = []
    for text in texts:
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            text_signature(text)
            best = min(best, time.perf_counter() - started)
        costs.append(best * 1e3)
    return {"median": statistics.median(costs), "mean": statistics.fmean(costs),
            "max": max(costs)}


def content_stage(pages: list[tuple[str, bytes]], repeat: int) -> dict[str, Any]:
    """The extract stage's figures with the analysts' content (see the module docstring)."""
    results = fetch_results(pages)

    def stage(sign: bool) -> int:
        for result in results:
            parse_page(result, USER_AGENT, sign=sign)
        return len(results)

    texts = [content.text for content in
             (parse_page(r, USER_AGENT, sign=False)[0].content for r in results)
             if content is not None]
    words = [len(text.split()) for text in texts]
    return {
        "extract_content_pages_per_s": timed(functools.partial(stage, False), repeat),
        "signature_ms": signature_costs(texts, repeat),
        "extract_stage_pages_per_s": timed(functools.partial(stage, True), repeat),
        "text_words": {"median": statistics.median(words) if words else 0,
                       "mean": statistics.fmean(words) if words else 0.0},
    }


def timed(fn: Callable[[], int], repeat: int) -> dict[str, float]:
    """Runs ``fn`` (which returns how many items it handled) ``repeat`` times: items/s. The
    parsed-URL cache is emptied before each run, so every URL is parsed (the links are unique)."""
    rates = []
    for _ in range(repeat):
        url_parts.cache_clear()
        started = time.perf_counter()
        n = fn()
        rates.append(n / max(1e-9, time.perf_counter() - started))
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates)}


def run(pages: list[tuple[str, bytes]], repeat: int) -> dict[str, Any]:
    # Unique links: a repeated URL would be served by the parsed-URL cache and flatter us.
    links = list(dict.fromkeys(link for url, body in pages
                               for link in extract_html(body, url).links))
    results: dict[str, Any] = {"pages": len(pages), "unique_links": len(links),
                               "bytes": sum(len(b) for _, b in pages)}

    def extract() -> int:
        for url, body in pages:
            extract_html(body, url)
        return len(pages)

    results["extract_pages_per_s"] = timed(extract, repeat)

    try:
        from scrapy.http import HtmlResponse  # type: ignore[import-not-found, unused-ignore]
        from scrapy.linkextractors import LinkExtractor  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        results["scrapy_extract_pages_per_s"] = None
    else:
        extractor = LinkExtractor()
        responses = [HtmlResponse(url, body=body, encoding="utf-8") for url, body in pages]

        def scrapy_extract() -> int:
            for response in responses:
                extractor.extract_links(response)
            return len(responses)

        results["scrapy_extract_pages_per_s"] = timed(scrapy_extract, repeat)

    from w3lib.url import canonicalize_url as w3lib_canonicalize

    messy = [messy_variant(link) for link in links]
    for name, urls in (("canonical", links), ("canonical_messy", messy)):
        results[f"{name}_urls_per_s"] = timed(
            functools.partial(canonicalize_each, urls), repeat)
        results[f"w3lib_{name}_urls_per_s"] = timed(
            functools.partial(canonicalize_each, urls, w3lib_canonicalize), repeat)

    rules = rules_from_response(200, ROBOTS, 0.0)

    def robots() -> int:
        for link in links:
            rules.allows(link, "beam-crawler")
        return len(links)

    results["robots_decisions_per_s"] = timed(robots, repeat)

    def per_link() -> int:
        # What the crawl does for every discovered link outside the network: canonical form,
        # politeness key, fingerprint for the seen filter, robots decision.
        for link in links:
            try:
                url = canonicalize_url(link)
            except InvalidUrl:
                continue
            politeness_key(url)
            url_fingerprint(url)
            rules.allows(url, "beam-crawler")
        return len(links)

    rate = timed(per_link, repeat)
    results["per_link_us"] = {k: 1e6 / v for k, v in rate.items()}
    results["per_link_us"]["min"], results["per_link_us"]["max"] = (
        results["per_link_us"]["max"], results["per_link_us"]["min"])
    results.update(content_stage(pages, repeat))
    return results


def report(results: dict[str, Any]) -> str:
    lines = [f"corpus: {results['pages']} pages, {results['unique_links']} unique links, "
             f"{results['bytes'] / 1e6:.1f} MB", ""]
    for key, label in (("extract_pages_per_s", "link extraction, pages/s"),
                       ("scrapy_extract_pages_per_s", "  Scrapy LinkExtractor, pages/s"),
                       ("canonical_urls_per_s", "canonicalization (as found), URLs/s"),
                       ("w3lib_canonical_urls_per_s", "  w3lib.canonicalize_url, URLs/s"),
                       ("canonical_messy_urls_per_s", "canonicalization (messy), URLs/s"),
                       ("w3lib_canonical_messy_urls_per_s", "  w3lib.canonicalize_url, URLs/s"),
                       ("robots_decisions_per_s", "robots decisions/s"),
                       ("per_link_us", "per-link overhead, us"),
                       ("extract_content_pages_per_s", "extract stage + content, pages/s"),
                       ("extract_stage_pages_per_s", "  ... + signatures, pages/s")):
        value = results.get(key)
        if value is None:
            lines.append(f"{label:<36} (not installed)")
            continue
        target = TARGETS.get(key)
        verdict = ""
        if target is not None:
            met = (value["median"] <= target if key in LOWER_IS_BETTER
                   else value["median"] >= target)
            verdict = f"  target {target:,.0f}: {'met' if met else 'NOT met'}"
        lines.append(f"{label:<36} {value['median']:>12,.1f}  "
                     f"[{value['min']:,.1f} .. {value['max']:,.1f}]{verdict}")
    sig = results["signature_ms"]
    met = sig["median"] <= TARGETS["signature_ms"]
    lines.append(f"{'MinHash signature, ms/page':<36} {sig['median']:>12,.3f}  "
                 f"[mean {sig['mean']:.3f}, max {sig['max']:.3f}]  target "
                 f"{TARGETS['signature_ms']}: {'met' if met else 'NOT met'}")
    lines.append(f"{'main text, words/page':<36} {results['text_words']['median']:>12,.0f}  "
                 f"[mean {results['text_words']['mean']:,.0f}]")
    scrapy = results.get("scrapy_extract_pages_per_s")
    if scrapy:
        ratio = results["extract_pages_per_s"]["median"] / scrapy["median"]
        lines.append(f"\nlink extraction, ours / Scrapy: {ratio:.2f}x")
    for ours, theirs, label in (
            ("canonical_urls_per_s", "w3lib_canonical_urls_per_s", "as found"),
            ("canonical_messy_urls_per_s", "w3lib_canonical_messy_urls_per_s", "messy")):
        ratio = results[ours]["median"] / results[theirs]["median"]
        lines.append(f"canonicalization ({label}), ours / w3lib: {ratio:.2f}x")
    return "\n".join(lines)


def corpus_parser(description: str, default_out: str) -> argparse.ArgumentParser:
    """The options every corpus microbenchmark shares: ``--corpus``, ``--repeat``, ``--quick``,
    ``--out``."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, action="append",
                        help=f"folder of HTML files (default: {DOC_ROOT})")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="50 pages, one repetition")
    parser.add_argument("--out", type=Path, default=Path(default_out))
    return parser


def corpus_pages(args: argparse.Namespace) -> list[tuple[str, bytes]]:
    roots = args.corpus or ([DOC_ROOT] if DOC_ROOT.is_dir() else [])
    return load_corpus(roots, limit=50 if args.quick else None)


def repetitions(args: argparse.Namespace) -> int:
    return 1 if args.quick else int(args.repeat)


def write_results(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = corpus_parser(__doc__ or "", "results/stages.json").parse_args(argv)
    results = run(corpus_pages(args), repetitions(args))
    results["machine"] = {"python": platform.python_version(), "cpus": _cpus(),
                          "platform": platform.platform()}
    print(report(results))
    write_results(args.out, results)
    print(f"\nwritten: {args.out}")
    return results


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main(sys.argv[1:])
