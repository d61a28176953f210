"""A deep site: a chain of pages, each linking only to the next (and home), for measuring how
long a crawl takes to go one level deeper.

``/`` links to ``/chain/0``; ``/chain/N`` links to ``/chain/N+1`` (up to ``depth - 1``) and
to ``/``. Every page has text of its own (no two are duplicates). A crawler that fetches a
level only after the previous one's links came back through a queue elsewhere pays that trip
at every level; the gaps between requests in the server's log show it.
"""

from __future__ import annotations

import html
from urllib.parse import urlsplit

from pipeline.demo.exchange import Reply, RequestView

ROBOTS = b"User-agent: *\nAllow: /\n"


class Chain:
    """The site's ``respond`` callback (stateless; safe on the server's loop)."""

    def __init__(self, depth: int = 200) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.depth = depth

    def paths(self) -> list[str]:
        """Every page a crawl should fetch, home first."""
        return ["/"] + [f"/chain/{i}" for i in range(self.depth)]

    def respond(self, request: RequestView) -> Reply:
        path = urlsplit(request.target).path
        if path == "/robots.txt":
            return Reply(body=ROBOTS, content_type="text/plain")
        if path == "/":
            return Reply(body=_page("Home", "The start of a long chain of pages.",
                                    ["/chain/0"]))
        number = path.removeprefix("/chain/")
        if path.startswith("/chain/") and number.isdigit() and int(number) < self.depth:
            n = int(number)
            links = ["/"] + ([f"/chain/{n + 1}"] if n + 1 < self.depth else [])
            return Reply(body=_page(f"Page {n}", f"Page number {n} of the chain, with words "
                                    f"of its own: {' '.join(f'w{n}x{k}' for k in range(12))}.",
                                    links))
        return Reply(404, _page("Not found", "No such page.", ["/"]))


def _page(title: str, text: str, links: list[str]) -> bytes:
    nav = "".join(f'<li><a href="{html.escape(h)}">{html.escape(h)}</a></li>' for h in links)
    return (f"<!doctype html><html lang=en><head><title>{html.escape(title)}</title></head>"
            f"<body><main><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
            f"<ul>{nav}</ul></main></body></html>").encode()
