"""A faceted catalogue: the DUST case of issue 15, served by ``pipeline.demo.server``.

``/facet/?color=red&size=m`` lists the products with those filters; each page links to itself
with one more filter appended last, so ``?color=red&size=m`` and ``?size=m&color=red`` are two
URLs of one page. With ``FACETS`` as below the catalogue has 79 distinct filter pages (plus the
home page) under 292 URLs; a crawl that does not learn the parameter order fetches them all.

The page text depends only on the set of filters, never on their order; the navigation
(the links) does, as on real catalogues.

    from pipeline.demo.catalogue import Catalogue
    with LoggedServers() as servers:
        base = servers.serve("127.0.0.9", Catalogue().respond)
"""

from __future__ import annotations

import hashlib
import html
import itertools
import math
from collections.abc import Sequence
from urllib.parse import parse_qsl, urlsplit

from pipeline.demo.exchange import Reply, RequestView

FACETS: dict[str, tuple[str, ...]] = {
    "color": ("red", "blue", "green", "black"),
    "size": ("s", "m", "l"),
    "brand": ("acme", "zenith", "nova"),
}
_NOUNS = ("jacket", "boot", "scarf", "glove", "hat", "coat", "shirt", "sock", "belt", "bag")
_ADJECTIVES = ("warm", "light", "waterproof", "classic", "slim", "sturdy", "soft", "bright")


def distinct_pages() -> int:
    """Filter sets with at least one filter: each facet unset or one of its values."""
    return math.prod(len(values) + 1 for values in FACETS.values()) - 1


def url_space() -> int:
    """URLs of filter pages a crawl can reach: every ordered choice of filters."""
    total = 0
    names = list(FACETS)
    for k in range(1, len(names) + 1):
        for chosen in itertools.combinations(names, k):
            total += math.factorial(k) * math.prod(len(FACETS[n]) for n in chosen)
    return total


def filters_of(target: str) -> list[tuple[str, str]] | None:
    """The filters of a request-target, in URL order (None when one is unknown or repeated)."""
    pairs = parse_qsl(urlsplit(target).query)
    names = [n for n, _ in pairs]
    if len(set(names)) != len(names):
        return None
    if any(n not in FACETS or v not in FACETS[n] for n, v in pairs):
        return None
    return pairs


def listing(filters: Sequence[tuple[str, str]]) -> str:
    """The products of a filter set: a text that depends on the set only."""
    key = "&".join(f"{n}={v}" for n, v in sorted(filters))
    seed = int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big")
    attrs = " ".join(v for _, v in sorted(filters))
    items = []
    for i in range(8):
        seed, a = divmod(seed, len(_ADJECTIVES))
        seed, n = divmod(seed, len(_NOUNS))
        items.append(f"The {_ADJECTIVES[a]} {attrs} {_NOUNS[n]} number {i + 1} costs "
                     f"{(seed % 90) + 10} euros and ships in {(seed % 5) + 1} days.")
        seed = seed * 31 + i + 7
    return " ".join(items)


class Catalogue:
    """The catalogue's ``respond`` callback (stateless; safe on the server's loop)."""

    def respond(self, request: RequestView) -> Reply:
        path = urlsplit(request.target).path
        if path == "/robots.txt":
            return Reply(body=b"User-agent: *\nAllow: /\n", content_type="text/plain")
        if path == "/":
            links = [f"/facet/?{n}={v}" for n, values in FACETS.items() for v in values]
            return Reply(body=_page("Catalogue", "Choose a filter to start.", links))
        filters = filters_of(request.target) if path == "/facet/" else None
        if not filters:
            return Reply(404, _page("Not found", "No such page.", ["/"]))
        here = request.target.split("?", 1)[1]
        used = {n for n, _ in filters}
        links = ["/"] + [f"/facet/?{here}&{n}={v}" for n, values in FACETS.items()
                         if n not in used for v in values]
        title = "Products: " + ", ".join(f"{n} {v}" for n, v in sorted(filters))
        return Reply(body=_page(title, listing(filters), links))


def _page(title: str, text: str, links: Sequence[str]) -> bytes:
    nav = "".join(f'<li><a href="{html.escape(href)}">{html.escape(href)}</a></li>'
                  for href in links)
    return (f"<!doctype html><html lang=en><head><title>{html.escape(title)}</title></head>"
            f"<body><nav><ul>{nav}</ul></nav><main><h1>{html.escape(title)}</h1>"
            f"<p>{html.escape(text)}</p></main></body></html>").encode()
