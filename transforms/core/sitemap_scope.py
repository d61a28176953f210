"""What a sitemap may list: the protocol's scope rules, and the priority its entries map to
(pure; ``transforms.core.sitemaps`` parses the files, ``transforms.core.sitemap_links`` turns
what is in scope into requests)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from transforms.core.sitemaps import KIND_INDEX, Sitemap, SitemapEntry
from transforms.core.urls import UrlParts, url_parts


def in_scope(sitemap_url: str, entry_url: str, *, robots_origin: str | None = None) -> bool:
    """Tells whether a sitemap may list a page URL (the protocol's "Sitemap file location").

    A sitemap at ``http://example.com/catalog/sitemap.xml`` may list URLs that start with
    ``http://example.com/catalog/``: same scheme, host and port, under its directory. URLs are
    compared in canonical form, so ``/catalog/../admin/`` is out of scope. Cross-submission:
    a robots.txt naming a sitemap vouches for its whole origin, so ``robots_origin`` extends
    the scope to every URL of that origin, whatever the sitemap's own host or directory.

    Args:
        sitemap_url: the URL the sitemap was fetched from (after redirects).
        entry_url: the URL the sitemap lists.
        robots_origin: the robots.txt URL (or any URL of its origin) that named the sitemap;
            None when the sitemap was found otherwise (e.g. at ``/sitemap.xml``).

    Returns:
        True if the entry is in scope; False otherwise, including for an invalid URL.
    """
    entry = _parts(entry_url)
    if entry is None:
        return False
    if robots_origin is not None and _same_origin(entry, _parts(robots_origin)):
        return True
    sitemap = _parts(sitemap_url)
    if sitemap is None or not _same_origin(entry, sitemap):
        return False
    return entry.path.startswith(sitemap.path[:sitemap.path.rfind("/") + 1])


def filter_scope(
    sitemap: Sitemap, sitemap_url: str, *, robots_origin: str | None = None
) -> tuple[list[SitemapEntry], int]:
    """Keeps the entries a sitemap may list; see :func:`in_scope`.

    Child sitemaps of an index follow the protocol's rule for indexes instead: same scheme,
    host and port as the index (or ``robots_origin``), any directory, since each child's own
    location then bounds what it may list. The protocol forbids an index listing an index:
    the caller should not follow an index found through an index.

    Args:
        sitemap: the parsed sitemap.
        sitemap_url: the URL it was fetched from (after redirects).
        robots_origin: as for :func:`in_scope`.

    Returns:
        The entries in scope, in order, and the number dropped.
    """
    if sitemap.kind == KIND_INDEX:
        index = _parts(sitemap_url)
        robots = _parts(robots_origin) if robots_origin is not None else None
        kept = []
        for entry in sitemap.entries:
            child = _parts(entry.url)
            if child is not None and (_same_origin(child, index) or _same_origin(child, robots)):
                kept.append(entry)
    else:
        kept = [e for e in sitemap.entries
                if in_scope(sitemap_url, e.url, robots_origin=robots_origin)]
    return kept, len(sitemap.entries) - len(kept)


def sitemap_priority(entry: SitemapEntry, base_priority: int, *, scale: int = 10) -> int:
    """Maps an entry's 0.0-1.0 priority to the crawler's integer priority (higher is sooner).

    The default 0.5 (or none) keeps ``base_priority``; 1.0 adds ``scale / 2``, 0.0 subtracts
    it; halves round away from zero, so 0.35 gives -2 as 0.65 gives +2. A site ranks only its
    own pages, so the scale stays small next to the crawler's other priority sources.

    Args:
        entry: the sitemap entry.
        base_priority: the priority the URL would otherwise get (e.g. the sitemap request's).
        scale: the width of the range of adjustments.

    Returns:
        ``base_priority`` plus the rounded adjustment.
    """
    if entry.priority is None:
        return base_priority
    offset = (Decimal(repr(entry.priority)) - Decimal("0.5")) * scale
    return base_priority + int(offset.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _parts(url: str) -> UrlParts | None:
    try:
        return url_parts(url)
    except ValueError:  # InvalidUrl
        return None


def _same_origin(a: UrlParts, b: UrlParts | None) -> bool:
    return b is not None and (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)
