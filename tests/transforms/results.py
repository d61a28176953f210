"""Fetch results for the composites' tests: an HTML page as a fetcher returns it."""

from __future__ import annotations

from transforms.core.records import OUTCOME_FETCHED, CrawlRequest, FetchResult

HTML = b"""<!doctype html><html><head><title> Home  page </title>
<base href="/docs/"></head><body>
<a href="a.html#frag">A</a> <a href="a.html">A again</a> <a href="/b">B</a>
<a href="http://Other.Example:80/x">other</a> <a href="mailto:x@y">mail</a>
</body></html>"""


def fetch_result(url="http://site.example/index.html", body=HTML, **kw) -> FetchResult:
    defaults = dict(request=CrawlRequest(url, depth=1, priority=2), host="site.example",
                    fetched_at=1_700_000_000.0, final_url=url, status=200,
                    content_type="text/html; charset=utf-8",
                    headers=(("Content-Type", "text/html; charset=utf-8"),), body=body,
                    content_length=len(body or b""), outcome=OUTCOME_FETCHED)
    defaults.update(kw)
    return FetchResult(**defaults)
