"""Deterministic content of the demo site: page layout, HTML, small assets and the crawl closure.

Everything here is pure (no sockets, no clock): given a :class:`SiteSpec`, the host's base URL and
a seed, :func:`build_responses` returns every response the host serves, byte for byte, and
``pipeline.demo.log.crawl_closure`` walks the resulting link graph the way a correct, robots-obeying
crawler would. ``pipeline.demo.site`` serves these tables over HTTP and exposes the ground truth.

Layout of one host with ``pages = N`` HTML pages (``N >= MIN_PAGES``)::

    /                        home            /about.html           about
    /articles/  /docs/  /docs/guide/         section listings (first half of the section)
    /articles/?page=2  /docs/?page=2  /docs/guide/?page=2&sort=title    second halves
    /new-page.html           only reached through the 301 from /old
    /landing.html            only reached through another host's 302 from /moved
    <section>page-<j>.html   N - 10 leaf pages, j = 1..N-10, section SECTIONS[j % 3]

plus the fixed special paths (robots.txt, a PDF, a PNG, a linked 404, two redirects) and one
``members.html`` page under each disallowed prefix, which only robots.txt keeps crawlers out of.
Links live only in ``<a href>`` elements (and one ``<base href>`` on some leaves); 404 pages,
redirect bodies and the disallowed pages carry no links.
"""

from __future__ import annotations

import html
import posixpath
import random
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from pipeline.demo.content import pdf, phrase, png, sentence

HOME_PATH = "/"
ABOUT_PATH = "/about.html"
ROBOTS_PATH = "/robots.txt"
PDF_PATH = "/files/report.pdf"
PNG_PATH = "/img/logo.png"
MISSING_PATH = "/missing.html"
OLD_PATH = "/old"
NEW_PATH = "/new-page.html"
MOVED_PATH = "/moved"
LANDING_PATH = "/landing.html"
SECTIONS = ("/articles/", "/docs/", "/docs/guide/")
SECOND_LISTINGS = ("/articles/?page=2", "/docs/?page=2", "/docs/guide/?page=2&sort=title")
FIXED_HTML_PATHS = (HOME_PATH, ABOUT_PATH, *SECTIONS, *SECOND_LISTINGS, NEW_PATH, LANDING_PATH)
SPECIAL_PATHS = (ROBOTS_PATH, PDF_PATH, PNG_PATH, MISSING_PATH, OLD_PATH, MOVED_PATH)
MIN_PAGES = len(FIXED_HTML_PATHS) + 2 * len(SECTIONS)
DEFAULT_PAGES_PER_HOST = 60
HTML_TYPE = "text/html; charset=utf-8"



@dataclass(frozen=True)
class SiteSpec:
    """What one demo host serves.

    Attributes:
        name: a short unique label (``alpha``), used in titles and to seed the generated text.
        pages: number of HTML pages served with status 200 (not counting disallowed pages).
        has_robots: serve ``/robots.txt``; when False the path answers 404.
        crawl_delay: seconds written as ``Crawl-delay:`` into robots.txt, or None for no line.
        disallow: path prefixes written as ``Disallow:`` lines; each must start with ``/`` and
            hold no wildcards. One ``members.html`` page under each prefix is linked and served.
        other_hosts: base URLs of the other demo hosts, linked from several pages.
        redirect_host: base URL that ``/moved`` redirects (302) to; None serves a 404 there.
        unreachable_url: a URL nothing listens on, linked from the about page, or None.
        coding: the Content-Encoding the host's server applies to text responses when the
            client accepts it, like nginx with ``gzip on``: ``"gzip"``, ``"deflate"`` or None.
    """

    name: str
    pages: int = DEFAULT_PAGES_PER_HOST
    has_robots: bool = True
    crawl_delay: float | None = None
    disallow: tuple[str, ...] = ()
    other_hosts: tuple[str, ...] = ()
    redirect_host: str | None = None
    unreachable_url: str | None = None
    coding: str | None = "gzip"

    def __post_init__(self) -> None:
        if not self.name.isalnum():
            raise ValueError(f"SiteSpec.name must be alphanumeric, got {self.name!r}")
        if self.pages < MIN_PAGES:
            raise ValueError(f"SiteSpec.pages must be >= {MIN_PAGES}, got {self.pages}")
        if self.crawl_delay is not None and self.crawl_delay < 0:
            raise ValueError(f"SiteSpec.crawl_delay must be >= 0, got {self.crawl_delay}")
        if not self.has_robots and (self.crawl_delay is not None or self.disallow):
            raise ValueError("crawl_delay and disallow need has_robots=True")
        if self.coding not in ("gzip", "deflate", None):
            raise ValueError(f"SiteSpec.coding must be gzip, deflate or None, got {self.coding!r}")
        for prefix in self.disallow:
            if not prefix.startswith("/") or prefix == "/" or any(c in prefix for c in "*$?#"):
                raise ValueError(f"disallow prefixes must be plain paths below /, got {prefix!r}")

    @property
    def robots_txt(self) -> str | None:
        """The robots.txt text this host serves, or None when it answers 404."""
        if not self.has_robots:
            return None
        lines = [f"# robots.txt for the {self.name} demo host", "User-agent: *"]
        if self.crawl_delay is not None:
            lines.append(f"Crawl-delay: {self.crawl_delay:g}")
        lines.extend(f"Disallow: {prefix}" for prefix in self.disallow)
        if not self.disallow:
            lines.append("Disallow:")
        return "\n".join(lines) + "\n"

    @property
    def private_paths(self) -> tuple[str, ...]:
        """The disallowed paths this host links to and serves (one per prefix)."""
        return tuple(p.rstrip("/") + "/members.html" for p in self.disallow)


@dataclass(frozen=True)
class DemoResponse:
    """One response as the server answers it, before content-coding.

    Attributes:
        status: HTTP status code.
        content_type: the Content-Type header.
        body: the content. The server sends it compressed (its host's ``SiteSpec.coding``) when
            it is textual, at least 20 bytes long and the client accepts the coding;
            otherwise as is, and it is then also the Content-Length.
        location: the Location header of a redirect, as sent (may be relative).
        links: absolute URLs the page's ``<a href>`` elements resolve to (after ``<base href>``),
            fragments kept, in document order with duplicates; empty for non-HTML responses.
    """

    status: int
    content_type: str
    body: bytes
    location: str | None = None
    links: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Link:
    """A link to render: ``target`` is an absolute URL, or a literal href when ``raw``."""

    target: str
    text: str
    raw: bool = False


@dataclass(frozen=True)
class _Plan:
    title: str
    base_href: str | None
    inline: tuple[_Link, ...]
    related: tuple[_Link, ...]


def leaf_paths(spec: SiteSpec) -> list[str]:
    """Paths of the leaf pages, ``page-1.html`` .. ``page-<pages-10>.html`` across sections."""
    count = spec.pages - len(FIXED_HTML_PATHS)
    return [f"{SECTIONS[j % len(SECTIONS)]}page-{j}.html" for j in range(1, count + 1)]


def html_page_paths(spec: SiteSpec) -> list[str]:
    """Every HTML page served with 200 (``spec.pages`` paths), disallowed pages excluded."""
    return [*FIXED_HTML_PATHS, *leaf_paths(spec)]


def not_found_response(path: str) -> DemoResponse:
    """The 404 every unknown path (and ``/missing.html``) gets; it carries no links."""
    text = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>404 Not Found</title></head><body><h1>Not Found</h1>"
        f"<p>Nothing lives at {html.escape(path)} on this demo host.</p></body></html>\n"
    )
    return DemoResponse(404, HTML_TYPE, text.encode())


def build_responses(spec: SiteSpec, base_url: str, seed: int = 0) -> dict[str, DemoResponse]:
    """Every response one host serves, keyed by request-target (path plus ``?query``).

    Args:
        spec: the host's spec, with ``other_hosts``/``redirect_host`` already filled in.
        base_url: the host's own base URL, ``http://127.0.0.2:PORT`` (no trailing slash).
        seed: makes the generated text, link shapes and assets reproducible.

    Returns:
        Request-target -> response. Paths missing from the table answer
        :func:`not_found_response`.
    """
    leaves = leaf_paths(spec)
    table: dict[str, DemoResponse] = {}
    for path in html_page_paths(spec):
        rng = random.Random(f"{seed}:{spec.name}:{path}")
        plan = _plan(spec, base_url, path, leaves, rng)
        table[path] = _render(spec, base_url, path, plan, rng)
    robots = spec.robots_txt
    if robots is not None:
        table[ROBOTS_PATH] = DemoResponse(200, "text/plain; charset=utf-8", robots.encode())
    table[PDF_PATH] = DemoResponse(200, "application/pdf", pdf(f"{spec.name} quarterly report"))
    colour = random.Random(f"{seed}:{spec.name}:colour")
    rgb = tuple(colour.randrange(256) for _ in "rgb")
    table[PNG_PATH] = DemoResponse(200, "image/png", png(rgb))
    table[MISSING_PATH] = not_found_response(MISSING_PATH)
    table[OLD_PATH] = _redirect(301, NEW_PATH)
    if spec.redirect_host is not None:
        table[MOVED_PATH] = _redirect(302, spec.redirect_host + LANDING_PATH)
    for private in spec.private_paths:
        body = _document(f"Members only | {spec.name}", None, "", "<p>Members only.</p>")
        table[private] = DemoResponse(200, HTML_TYPE, body.encode())
    return table


def _plan(
    spec: SiteSpec, base_url: str, path: str, leaves: list[str], rng: random.Random
) -> _Plan:
    """Decides the title, ``<base href>`` and links of one page (nav and footer are common)."""

    def here(target: str, text: str) -> _Link:
        return _Link(base_url + target, text)

    others = spec.other_hosts
    inline: tuple[_Link, ...]
    if path == HOME_PATH:
        inline = (here(leaves[0], "Start reading"), here(leaves[1] + "#section-2", "Skip ahead"),
                  here(leaves[2], "A third article"), here(OLD_PATH, "Our old page"),
                  here(PDF_PATH, "The quarterly report"),
                  _Link("javascript:void(0)", "Print", raw=True))
        related = tuple(_Link(o + "/", f"Sister site {i + 1}") for i, o in enumerate(others))
        related += tuple(_Link(o + "/docs/guide/", "Their guide") for o in others)
        return _Plan(f"Welcome to {spec.name}", None, inline, related)
    if path == ABOUT_PATH:
        inline = (here(PNG_PATH, "Our logo"), here(MISSING_PATH, "An old link"),
                  here(MOVED_PATH, "Where we moved"), here(PDF_PATH, "Report"),
                  _Link("mailto:webmaster@example.invalid", "Write to us", raw=True))
        related = tuple(here(p, "Members area") for p in spec.private_paths)
        related += tuple(_Link(o + ABOUT_PATH, "About our sister site") for o in others)
        if spec.unreachable_url is not None:
            related += (_Link(spec.unreachable_url, "Our retired mirror"),)
        return _Plan(f"About {spec.name}", None, inline, related)
    if path in SECTIONS or path in SECOND_LISTINGS:
        return _listing_plan(base_url, path, leaves)
    if path in (NEW_PATH, LANDING_PATH):
        picks = rng.sample(leaves, 2)
        label = "New page" if path == NEW_PATH else "Landing"
        return _Plan(f"{label} of {spec.name}", None, (here(picks[0], "Read this"),),
                     (here(picks[1] + "#section-1", "Or this"),))
    return _leaf_plan(spec, base_url, path, leaves, rng)


def _listing_plan(base_url: str, path: str, leaves: list[str]) -> _Plan:
    section, _, query = path.partition("?")
    members = [leaf for leaf in leaves if posixpath.dirname(leaf) + "/" == section]
    half = (len(members) + 1) // 2
    chunk = members[half:] if query else members[:half]
    links = [_Link(base_url + leaf, f"Entry {leaf.rsplit('-', 1)[1][:-5]}") for leaf in chunk]
    if query:
        pager = _Link("./", "First page", raw=True)
    else:
        second_query = SECOND_LISTINGS[SECTIONS.index(section)].partition("?")[2]
        pager = _Link(f"?{second_query}", "More", raw=True)
    title = f"Index of {section} ({'page 2' if query else 'page 1'})"
    return _Plan(title, None, (pager, links[0]), (*links, pager))


def _leaf_plan(
    spec: SiteSpec, base_url: str, path: str, leaves: list[str], rng: random.Random
) -> _Plan:
    j = leaves.index(path) + 1
    prev_leaf, next_leaf = leaves[j - 2], leaves[j % len(leaves)]
    picks = rng.sample([leaf for leaf in leaves if leaf != path], 3)
    section = SECTIONS[j % len(SECTIONS)]

    def here(target: str, text: str) -> _Link:
        return _Link(base_url + target, text)

    inline = [here(next_leaf + "#section-1", "Continue"), here(picks[0], "Related reading"),
              here(section, "Back to the section")]
    related = [here(prev_leaf, "Previous"), here(next_leaf, "Next"), here(picks[1], "See also"),
               here(picks[2] + "#section-2", "Further"), here(HOME_PATH, "Home")]
    if j % 7 == 0:
        related.append(here(PDF_PATH + "#page=2", "Report, page 2"))
    if j % 11 == 3:
        inline.append(here(MISSING_PATH, "A page that went away"))
    if j % 9 == 4:
        inline.append(here(OLD_PATH, "The old page"))
    if j == 3 and spec.private_paths:
        related.append(here(spec.private_paths[0], "Members"))
    if j % 6 == 1 and spec.other_hosts:
        other = spec.other_hosts[j % len(spec.other_hosts)]
        related.append(_Link(other + "/articles/", "Elsewhere"))
    base_href = None
    if j % 5 == 0:
        other_section = SECTIONS[(j + 1) % len(SECTIONS)]
        base_href = base_url + other_section if j % 10 == 0 else other_section
    title = f"{phrase(rng, 3).title()} \u2013 part {j}"  # a non-ASCII dash exercises charsets
    return _Plan(title, base_href, tuple(inline), tuple(related))


def _render(
    spec: SiteSpec, base_url: str, path: str, plan: _Plan, rng: random.Random
) -> DemoResponse:
    """Renders a plan to HTML, choosing each href's shape and recording what it resolves to."""
    effective = urljoin(base_url + path, plan.base_href) if plan.base_href else base_url + path
    resolved: list[str] = []

    def anchor(link: _Link) -> str:
        href = link.target if link.raw else _href(link.target, effective, rng)
        resolved.append(urljoin(effective, href))
        return f'<a href="{html.escape(href)}">{html.escape(link.text)}</a>'

    nav_targets = [("Home", HOME_PATH), ("About", ABOUT_PATH), ("Articles", SECTIONS[0]),
                   ("Docs", SECTIONS[1]), ("Guide", SECTIONS[2])]
    nav = "".join(f"<li>{anchor(_Link(base_url + p, t))}</li>" for t, p in nav_targets)
    header = f"<header><p>{html.escape(spec.name)} demo</p><nav><ul>{nav}</ul></nav></header>"
    sections = []
    n_sections = rng.randint(4, 6)
    for k in range(1, n_sections + 1):
        text = " ".join(sentence(rng) for _ in range(rng.randint(4, 6)))
        extra = "".join(f" See {anchor(link)}." for link in plan.inline[k - 1 :: n_sections])
        sections.append(f'<h2 id="section-{k}">{html.escape(phrase(rng, 2).title())}</h2>\n'
                        f"<p>{text}{extra}</p>")
    related = "".join(f"<li>{anchor(link)}</li>" for link in plan.related)
    footer_links = [_Link(base_url + HOME_PATH, "Home"), _Link(base_url + ABOUT_PATH, "About"),
                    _Link("#top", "Back to top", raw=True)]
    footer = " | ".join(anchor(link) for link in footer_links)
    main = (f"<main><article><h1>{html.escape(plan.title)}</h1>\n" + "\n".join(sections)
            + f"</article>\n<aside><h2>Related</h2><ul>{related}</ul></aside></main>\n"
            + f"<footer><p>{footer}</p></footer>")
    title = f"{plan.title} | {spec.name}"
    body = _document(title, plan.base_href, header, main).encode()
    return DemoResponse(200, HTML_TYPE, body, links=tuple(resolved))


def _document(title: str, base_href: str | None, header: str, main: str) -> str:
    base = f'<base href="{html.escape(base_href)}">\n' if base_href else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n{base}"
        "<style>body{font-family:sans-serif;max-width:44em;margin:auto}</style>\n"
        f'</head>\n<body id="top">\n{header}\n{main}\n</body>\n</html>\n'
    )


def _href(target: str, base: str, rng: random.Random) -> str:
    """Picks an href that resolves against ``base`` to exactly ``target``, in a random shape.

    Same-host shapes: ``/abs/path``, ``x``, ``./x``, ``../x``, ``?query``, full URL and
    scheme-relative ``//host/path``; other hosts get a full or scheme-relative URL.
    """
    t, b = urlsplit(target), urlsplit(base)
    tail = (f"?{t.query}" if t.query else "") + (f"#{t.fragment}" if t.fragment else "")
    options = [target, f"//{t.netloc}{t.path}{tail}"]
    if t.netloc == b.netloc:
        rel = posixpath.relpath(t.path, b.path[: b.path.rfind("/") + 1])
        rel = "./" if rel == "." else rel + "/" if t.path.endswith("/") else rel
        options += [t.path + tail] * 3 + [rel + tail] * 3
        if not rel.startswith("."):
            options += [f"./{rel}{tail}"] * 2
        if t.path == b.path and t.query:
            options += [tail] * 6
    href = rng.choice(options)
    return href if urljoin(base, href) == target else t.path + tail


def _redirect(status: int, location: str) -> DemoResponse:
    body = f"Moved to {location}\n".encode()
    return DemoResponse(status, "text/plain; charset=utf-8", body, location=location)
