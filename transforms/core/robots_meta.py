"""Page-level robots directives: ``<meta name="robots">``, crawler-specific meta names and
the ``X-Robots-Tag`` header.

Pure functions, no Beam import. Only the two directives that change what the crawler does are
read: ``noindex`` (the page is recorded as noindex and not exported for indexing) and
``nofollow`` (no link of the page enters the frontier). ``none`` means both; ``all``,
``index`` and ``follow`` are the defaults and change nothing; every other directive
(``noarchive``, ``max-snippet:50``, ``unavailable_after: ...``) and anything unknown is
ignored. Directives and names are case-insensitive; the most restrictive one wins, wherever
it appears.

Values are comma-separated lists; spaces also separate directives, since many pages write
``content="noindex nofollow"``. A value may address one crawler with a product-token prefix,
as search engines document for ``X-Robots-Tag``::

    X-Robots-Tag: googlebot: noindex, nofollow
    X-Robots-Tag: otherbot: noindex, googlebot: nofollow

The prefix applies to the directives after it, up to the next prefix or the end of the value;
directives before any prefix apply to every crawler. A prefix names a crawler only when it is
a product token (a letter, then letters, digits, ``_`` and ``-``) that is not itself a
directive taking a value (``max-snippet:``, ``unavailable_after:`` ...). Since a prefix runs
to the end of its value, header lines are best read separately (:func:`x_robots_tags`) rather
than comma-joined.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from transforms.core.robots import product_token

# Directives written "name: value"; their name is not a user-agent prefix.
VALUE_DIRECTIVES = frozenset({
    "max-snippet", "max-image-preview", "max-video-preview", "unavailable_after",
})
ROBOTS_META_NAME = "robots"

# A product-token prefix; it starts with a letter so that a time ("15:00") is not one.
_PREFIX = re.compile(r"\s*([A-Za-z][A-Za-z0-9_-]*)\s*:(.*)", re.DOTALL)
X_ROBOTS_TAG = "x-robots-tag"


@dataclass(frozen=True)
class RobotsDirectives:
    """What a page's robots directives ask of this crawler.

    Attributes:
        noindex: the page must not be indexed (recorded, not exported for indexing).
        nofollow: the page's links must not be followed.
    """

    noindex: bool = False
    nofollow: bool = False

    def union(self, other: RobotsDirectives) -> RobotsDirectives:
        """Combines two sets of directives: the most restrictive wins."""
        return RobotsDirectives(self.noindex or other.noindex, self.nofollow or other.nofollow)


def parse_directives(values: Iterable[str], user_agent: str) -> RobotsDirectives:
    """Reads robots directives from meta contents or X-Robots-Tag values.

    Args:
        values: the strings to read: ``content`` attributes of robots meta tags, or
            ``X-Robots-Tag`` header values, one per header line.
        user_agent: this crawler's User-Agent or its product token; directives prefixed with
            another crawler's token are ignored.

    Returns:
        The combined :class:`RobotsDirectives`.
    """
    token = product_token(user_agent).lower()
    noindex = nofollow = False
    for value in values:
        applies = True  # no prefix yet: the directives are for every crawler
        for part in value.split(","):
            prefix = _PREFIX.match(part)
            if prefix and prefix.group(1).lower() not in VALUE_DIRECTIVES:
                applies = prefix.group(1).lower() == token
                part = prefix.group(2)
            if not applies:
                continue
            for directive in part.lower().split():
                if directive in ("noindex", "none"):
                    noindex = True
                if directive in ("nofollow", "none"):
                    nofollow = True
    return RobotsDirectives(noindex, nofollow)


def page_directives(
    meta: Mapping[str, tuple[str, ...]], x_robots_tags: Iterable[str], user_agent: str
) -> RobotsDirectives:
    """Combines everything a page says to this crawler; the most restrictive wins.

    Args:
        meta: ``content`` values by lowercased meta ``name``, e.g. from :func:`meta_contents`.
            ``robots`` applies to every crawler, the name equal to this crawler's product
            token to this crawler only; other names are ignored.
        x_robots_tags: the ``X-Robots-Tag`` response header values.
        user_agent: this crawler's User-Agent or product token.

    Returns:
        The page's :class:`RobotsDirectives`.
    """
    token = product_token(user_agent).lower()
    names = {ROBOTS_META_NAME, token}
    contents = [c for name, values in meta.items() if name.strip().lower() in names
                for c in values]
    return parse_directives(contents, token).union(parse_directives(x_robots_tags, token))


def meta_contents(pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """Groups ``(name, content)`` pairs (e.g. ``HtmlInfo.meta_names``) by lowercased name.

    Args:
        pairs: meta names and contents, in document order.

    Returns:
        The contents of each name, in document order.
    """
    grouped: dict[str, list[str]] = {}
    for name, content in pairs:
        grouped.setdefault(name.strip().lower(), []).append(content)
    return {name: tuple(contents) for name, contents in grouped.items()}


def x_robots_tags(headers: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The values of every ``X-Robots-Tag`` header line, in order (names case-insensitive).

    Args:
        headers: response headers as ``(name, value)`` pairs, e.g. ``FetchResult.headers``.

    Returns:
        The header values.
    """
    return tuple(value for name, value in headers if name.strip().lower() == X_ROBOTS_TAG)
