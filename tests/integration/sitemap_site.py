"""The sitemap site of the end-to-end sitemap test: one loopback host whose pages are reachable
only through its sitemaps.

``/robots.txt`` names a gzip sitemap index, ``/sitemaps/index.xml.gz``, which lists an XML
urlset (``/sitemaps/pages.xml``: priorities, a lastmod, a robots-disallowed URL and a URL of
another origin), a text sitemap (``/sitemaps/more.txt``) and a child sitemap on another origin
(out of scope). The home page links to nothing. Like a stock nginx, the server gzips robots.txt,
the XML urlset and the text sitemap on the wire (the index is a ``.gz`` file already).
"""

from __future__ import annotations

import gzip

from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.server import LoggedServers
from tests.integration.sites import page

SITEMAP_ONLY = ("/only-in-sitemap/1", "/only-in-sitemap/2", "/only-in-sitemap/3")
DISALLOWED = "/private/secret"
FOREIGN = "http://127.0.0.99:9/foreign"  # another origin: out of every sitemap's scope


class SitemapSite:
    """Use as a context manager; ``base`` is its URL."""

    def __init__(self, address: str = "127.0.0.31") -> None:
        self._servers = LoggedServers()
        self._address = address
        self.base = ""

    def __enter__(self) -> SitemapSite:
        self.base = self._servers.serve(self._address, self._respond)
        return self

    def __exit__(self, *exc: object) -> None:
        self._servers.stop()

    def hits(self) -> list[Hit]:
        return self._servers.hits()

    def _respond(self, request: RequestView) -> Reply:
        base, target = self.base, request.target
        if target == "/robots.txt":
            return Reply(body=(f"User-agent: *\nDisallow: /private/\n"
                               f"Sitemap: {base}/sitemaps/index.xml.gz\n").encode(),
                         content_type="text/plain")
        if target == "/sitemaps/index.xml.gz":
            index = ('<?xml version="1.0" encoding="UTF-8"?>'
                     '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                     f"<sitemap><loc>{base}/sitemaps/pages.xml</loc></sitemap>"
                     f"<sitemap><loc>{base}/sitemaps/more.txt</loc></sitemap>"
                     "<sitemap><loc>http://127.0.0.99:9/sitemap.xml</loc></sitemap>"
                     "</sitemapindex>")
            return Reply(body=gzip.compress(index.encode(), mtime=0),
                         content_type="application/gzip")
        if target == "/sitemaps/pages.xml":
            urlset = ('<?xml version="1.0" encoding="UTF-8"?>'
                      '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                      f"<url><loc>{base}{SITEMAP_ONLY[0]}</loc><priority>1.0</priority>"
                      "<lastmod>2026-01-02</lastmod></url>"
                      f"<url><loc>{base}{SITEMAP_ONLY[1]}</loc><priority>0.2</priority></url>"
                      f"<url><loc>{base}{DISALLOWED}</loc></url>"
                      f"<url><loc>{FOREIGN}</loc></url>"
                      "</urlset>")
            return Reply(body=urlset.encode(), content_type="application/xml")
        if target == "/sitemaps/more.txt":
            return Reply(body=f"{base}{SITEMAP_ONLY[2]}\n".encode(), content_type="text/plain")
        if target == "/":
            return Reply(body=page("Home", text="nothing linked from here"))
        if target in SITEMAP_ONLY or target == DISALLOWED:
            return Reply(body=page(target, text="found through a sitemap"))
        return Reply(status=404, body=b"not found", content_type="text/plain")
