"""``ExtractLinks``: fetched HTML -> parsed pages (title, outlinks, the analysts' content) and
the links to crawl next.

The work is ``transforms.core.extraction.extract`` (HTML through ``transforms.core.links``,
selectolax): it decodes the body's content-coding, canonicalizes links and applies page-level
robots directives (``transforms.core.robots_meta``: ``<meta name="robots">``, ``<meta
name="<our token>">`` and ``X-Robots-Tag``, per-user-agent forms included): ``nofollow`` keeps
every link of the page out of the frontier, ``noindex`` marks the page (stored, not exported
for indexing). Links with ``rel=nofollow`` are never followed; ``rel=canonical`` is recorded
and, unless the page is nofollow, enqueued. Cross-host redirects become requests so they go
back through the frontier. A fetched sitemap (``transforms.core.sitemap_links``) yields its
child sitemaps or pages and a row with its summary; it is not stored. Links outside the crawl's
``--scope`` are dropped (``transforms.core.scope``).

Where it runs: the frontier's fetch service extracts each result next to its fetch, and the
frontier admits the links of the page's own key when it harvests the lease (no trip through
the loop for them); what reaches this stage is then a ``Discovered`` carrying the parsed page
and the links for other keys, which it passes on without parsing again. A bare
``FetchResult`` (a graph without that frontier, or a result the frontier could not extract) is
extracted here. Either way the page-level counters are kept here: ``pages_parsed``,
``pages_nofollow``, ``pages_noindex``, ``pages_with_text``, ``pages_text_truncated``,
``bodies_undecodable``, ``sitemaps_parsed``, and the distributions ``text_words`` and
``page_outlinks``; ``links_discovered`` counts the links this stage passes on to the loop.

Every decoded page also gets its ``PageContent`` (``transforms.core.page_content``: preview,
main text, word count, outlinks with anchor text, text digest, MinHash signature) from the same
parse.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms import METRICS_NAMESPACE
from transforms.core.extraction import (
    DEFAULT_MAX_DECODED_BYTES,
    UNDECODED,
    extract,
)
from transforms.core.records import (
    SITEMAP_KINDS,
    Discovered,
    FetchResult,
    PageContent,
    ParsedPage,
)
from transforms.core.scope import SCOPE_ANY


class _ExtractFn(beam.DoFn):
    def __init__(self, user_agent: str, max_body_bytes: int, scope: str) -> None:
        self._user_agent = user_agent
        self._max_body_bytes = max_body_bytes
        self._scope = scope

    def setup(self) -> None:
        self._pages = Metrics.counter(METRICS_NAMESPACE, "pages_parsed")
        self._links = Metrics.counter(METRICS_NAMESPACE, "links_discovered")
        self._redirects = Metrics.counter(METRICS_NAMESPACE, "redirects_to_frontier")
        self._nofollow = Metrics.counter(METRICS_NAMESPACE, "pages_nofollow")
        self._noindex = Metrics.counter(METRICS_NAMESPACE, "pages_noindex")
        self._sitemaps = Metrics.counter(METRICS_NAMESPACE, "sitemaps_parsed")
        self._sitemap_out_of_scope = Metrics.counter(METRICS_NAMESPACE, "sitemap_out_of_scope")
        self._out_of_scope = Metrics.counter(METRICS_NAMESPACE, "links_out_of_scope")
        self._undecodable = Metrics.counter(METRICS_NAMESPACE, "bodies_undecodable")
        self._with_text = Metrics.counter(METRICS_NAMESPACE, "pages_with_text")
        self._text_truncated = Metrics.counter(METRICS_NAMESPACE, "pages_text_truncated")
        self._text_words = Metrics.distribution(METRICS_NAMESPACE, "text_words")
        self._page_outlinks = Metrics.distribution(METRICS_NAMESPACE, "page_outlinks")

    def process(self, element: Discovered | FetchResult) -> Iterator[Discovered]:
        if isinstance(element, FetchResult):  # not extracted next to its fetch: here
            extraction = extract(element, self._user_agent, self._max_body_bytes, self._scope)
            self._out_of_scope.inc(extraction.out_of_scope)
            self._sitemap_out_of_scope.inc(extraction.sitemap_out_of_scope)
            element = extraction.discovered
        self._count(element)
        yield element

    def _count(self, found: Discovered) -> None:
        self._links.inc(len(found.links))
        item = found.item
        if isinstance(item, ParsedPage):
            self._pages.inc()
            if UNDECODED in item.fetch.detail:
                self._undecodable.inc()
            if item.nofollow:
                self._nofollow.inc()
            if item.noindex:
                self._noindex.inc()
            if item.content is not None:
                self._count_content(item.content)
        elif isinstance(item, FetchResult):
            if item.request.kind in SITEMAP_KINDS and item.outcome == "not_stored" \
                    and item.detail:
                self._sitemaps.inc()
                if UNDECODED in item.detail:
                    self._undecodable.inc()
            if item.redirect_to is not None:
                self._redirects.inc()

    def _count_content(self, content: PageContent) -> None:
        self._text_words.update(content.word_count)
        self._page_outlinks.update(len(content.outlinks))
        if content.word_count:
            self._with_text.inc()
        if content.text_truncated:
            self._text_truncated.inc()


class ExtractOutputs(NamedTuple):
    # Each result with the links it yields: a ParsedPage (body still attached, for the WARC
    # writer) or a FetchResult that is not stored (errors, non-HTML, redirects, sitemaps).
    discovered: beam.PCollection  # Discovered


class ExtractLinks(beam.PTransform):
    """Fetch results -> each with the links it yields (``Discovered``): a parsed page, or the
    result itself when it is not stored. Input elements extracted already (``Discovered``,
    from the frontier) are carried on; ``FetchResult`` elements are extracted here.

    ``user_agent`` selects the crawler-specific robots meta names and X-Robots-Tag forms;
    ``max_body_bytes`` caps a page's decoded size, as the fetch caps its size on the wire;
    ``scope`` is the crawl's ``--scope`` (``transforms.core.scope``).
    """

    def __init__(self, user_agent: str = "beam-crawler",
                 max_body_bytes: int = DEFAULT_MAX_DECODED_BYTES,
                 scope: str = SCOPE_ANY) -> None:
        super().__init__()
        self._user_agent = user_agent
        self._max_body_bytes = max_body_bytes
        self._scope = scope

    def expand(self, results: beam.PCollection) -> ExtractOutputs:
        return ExtractOutputs(results | "ParseHtml" >> beam.ParDo(
            _ExtractFn(self._user_agent, self._max_body_bytes, self._scope)))
