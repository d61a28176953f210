"""A planted duplicate corpus on one host: originals, their exact, same-text and near copies,
and distinct pages on the same template, with the ground truth (deterministic from a seed).

Every page has the same shape: ``<header>`` and ``<nav>`` boilerplate, an ``<article>`` with an
``<h1>`` and paragraphs (the main text), and a ``<footer>``. The kinds (``KINDS``):

========== ========================= =====================================================
kind       path                      what it is
========== ========================= =====================================================
original   ``/articles/<slug>.html`` a text of 300-800 words from a Zipf-weighted vocabulary
exact      ``/mirror/<slug>.html``   the original's bytes, unchanged
same_text  ``/print/<slug>.html``    the same main text in a print layout: other navigation,
                                     other markup and classes, no related links
near       ``/syndicated/<slug>.html`` the original's layout; 2-4% of the words edited by
                                     whole sentences inserted or deleted, as syndicated
                                     copies differ
near_nav   ``/m/<slug>.html``        a mobile layout (other navigation) plus a few edits: one
                                     word replaced, a short "updated" sentence added
distinct   ``/articles/<slug>.html`` another text on the original template
========== ========================= =====================================================

With 5-word shingles the near kinds' exact Jaccard to their original is 0.91-0.99 (inserting or
deleting k words costs about k + 8 shingles of the union, replacing one word 10), so at the
crawl's 0.9 threshold they are near copies; editing the same share of words at scattered places
would give J of 0.7-0.8 (``transforms.core.lsh`` has the arithmetic). ``/`` links every page,
``/robots.txt`` allows everything; other paths answer 404.

``planted_site(base_url)`` gives the responses (``pipeline.demo.pages.DemoResponse`` by
request-target) and the truth (URL -> ``Truth(kind, original URL)``); ``planted_pages`` gives the
generator's pages with their main texts (no HTML parsing needed); ``PlantedSite`` serves the
corpus on a loopback address through ``pipeline.demo.server.LoggedServers``.
"""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import NamedTuple

from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.pages import HTML_TYPE, DemoResponse, not_found_response
from pipeline.demo.server import LoggedServers

ORIGINAL, EXACT, SAME_TEXT, NEAR, NEAR_NAV, DISTINCT = (
    "original", "exact", "same_text", "near", "near_nav", "distinct")
KINDS = (ORIGINAL, EXACT, SAME_TEXT, NEAR, NEAR_NAV, DISTINCT)
COPY_KINDS = {EXACT: "/mirror/", SAME_TEXT: "/print/", NEAR: "/syndicated/", NEAR_NAV: "/m/"}
DEFAULT_ORIGINALS = 30
DEFAULT_DISTINCT = 30
WORDS_RANGE = (300, 800)
EDIT_FRACTION = (0.02, 0.04)
ROBOTS_TXT = b"User-agent: *\nDisallow:\n"

_FUNCTION_WORDS = ("the of and to in a is that for it as with was on be by at this are from or "
                   "an which but not have has had were can their its more also will one all "
                   "these than been into other such when there may only new some most").split()
_ONSETS = ("b bl br c ch cr d dr f fl g gr h j k l m n p pl pr qu r s sc sh sl st str t th "
           "tr v w z").split()
_VOWELS = ("a e i o u ai ea ee ie oa ou").split()
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "rk", "ng", "x")


class Truth(NamedTuple):
    """A planted page's kind and, for a copy, its original's URL (None otherwise)."""

    kind: str
    original: str | None


@dataclass(frozen=True)
class PlantedPage:
    """One planted page before it has a host.

    Attributes:
        path: its request-target.
        kind: one of ``KINDS``.
        original: the original's path, for copies; None otherwise.
        title: the ``<h1>`` (and ``<title>``) text.
        paragraphs: the article's paragraphs; ``text`` joins them after the title.
        layout: ``site``, ``print`` or ``mobile``.
    """

    path: str
    kind: str
    original: str | None
    title: str
    paragraphs: tuple[str, ...]
    layout: str = "site"

    @property
    def text(self) -> str:
        """The main text as an extractor should find it: title, then paragraphs."""
        return " ".join((self.title, *self.paragraphs))


class _Vocabulary:
    """Pseudo-words built from syllables, drawn with Zipf weights after the function words, so
    texts have natural-language repetition (frequent short words, many rare ones)."""

    def __init__(self, seed: int, size: int = 6000) -> None:
        rng = random.Random(f"planted-vocabulary:{seed}")
        words: list[str] = []
        seen = set(_FUNCTION_WORDS)
        while len(words) < size:
            word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                           for _ in range(rng.choice((1, 2, 2, 3))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = [*_FUNCTION_WORDS, *words]
        self.weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]

    def sentence(self, rng: random.Random, low: int = 8, high: int = 18) -> str:
        words = rng.choices(self.words, self.weights, k=rng.randint(low, high))
        return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _paragraphs(vocab: _Vocabulary, rng: random.Random) -> list[list[str]]:
    """Paragraphs of 3-6 sentences totalling a word count in ``WORDS_RANGE``."""
    target = rng.randint(*WORDS_RANGE)
    paragraphs: list[list[str]] = []
    count = 0
    while count < target:
        paragraph: list[str] = []
        for _ in range(rng.randint(3, 6)):
            high = min(18, target - count)
            if high < 8:
                break
            paragraph.append(vocab.sentence(rng, 8, high))
            count += len(paragraph[-1].split())
        if not paragraph:
            break
        paragraphs.append(paragraph)
    return paragraphs


def _edited(vocab: _Vocabulary, rng: random.Random, paragraphs: list[list[str]]
            ) -> list[list[str]]:
    """A near copy: whole sentences inserted or deleted until 2-4% of the words are edited
    (an inserted or deleted sentence counts its words), as syndicated copies differ."""
    out = [list(p) for p in paragraphs]
    total = sum(len(s.split()) for p in out for s in p)
    budget = round(rng.uniform(*EDIT_FRACTION) * total)
    edited = 0
    while edited < budget:
        remaining = budget - edited
        deletable = [(p, s) for p, paragraph in enumerate(out) if len(paragraph) > 1
                     for s, sentence in enumerate(paragraph)
                     if len(sentence.split()) <= remaining]
        if deletable and rng.random() < 0.5:
            p, s = rng.choice(deletable)
            edited += len(out[p].pop(s).split())
        else:
            length = min(max(remaining, 3), 14)
            new = vocab.sentence(rng, length, length)
            p = rng.randrange(len(out))
            out[p].insert(rng.randint(0, len(out[p])), new)
            edited += length
    return out


def _renavigated(vocab: _Vocabulary, rng: random.Random, paragraphs: list[list[str]]
                 ) -> list[list[str]]:
    """A mobile copy's few edits: one word replaced and an "updated" sentence appended."""
    out = [list(p) for p in paragraphs]
    p = rng.randrange(len(out))
    s = rng.randrange(len(out[p]))
    words = out[p][s].split()
    words[rng.randrange(len(words))] = rng.choice(vocab.words[60:])
    out[p][s] = " ".join(words)
    out[-1].append(f"Updated on day {rng.randint(1, 28)} of month {rng.randint(1, 12)}.")
    return out


def planted_pages(seed: int = 0, originals: int = DEFAULT_ORIGINALS,
                  distinct: int = DEFAULT_DISTINCT) -> list[PlantedPage]:
    """Every planted page, originals first, each followed by its four copies, then the
    distinct pages (the order a breadth-first crawl of ``/`` finds them in).

    Raises:
        ValueError: when ``originals`` or ``distinct`` is negative.
    """
    if originals < 0 or distinct < 0:
        raise ValueError("originals and distinct must be >= 0")
    vocab = _Vocabulary(seed)
    pages: list[PlantedPage] = []
    slugs: set[str] = set()
    for i in range(originals + distinct):
        rng = random.Random(f"planted:{seed}:{i}")
        slug = _slug(vocab, rng, slugs)
        title = vocab.sentence(rng, 4, 8).rstrip(".")
        paragraphs = _paragraphs(vocab, rng)
        path = f"/articles/{slug}.html"
        if i >= originals:
            pages.append(PlantedPage(path, DISTINCT, None, title, _join(paragraphs)))
            continue
        pages.append(PlantedPage(path, ORIGINAL, None, title, _join(paragraphs)))
        pages.append(PlantedPage(COPY_KINDS[EXACT] + f"{slug}.html", EXACT, path, title,
                                 _join(paragraphs)))
        pages.append(PlantedPage(COPY_KINDS[SAME_TEXT] + f"{slug}.html", SAME_TEXT, path,
                                 title, _join(paragraphs), layout="print"))
        pages.append(PlantedPage(COPY_KINDS[NEAR] + f"{slug}.html", NEAR, path, title,
                                 _join(_edited(vocab, rng, paragraphs))))
        pages.append(PlantedPage(COPY_KINDS[NEAR_NAV] + f"{slug}.html", NEAR_NAV, path, title,
                                 _join(_renavigated(vocab, rng, paragraphs)), layout="mobile"))
    return pages


def _slug(vocab: _Vocabulary, rng: random.Random, taken: set[str]) -> str:
    while True:
        slug = "-".join(rng.choice(vocab.words[60:]) for _ in range(3))
        if slug not in taken:
            taken.add(slug)
            return slug


def _join(paragraphs: Sequence[Sequence[str]]) -> tuple[str, ...]:
    return tuple(" ".join(p) for p in paragraphs)


def render(page: PlantedPage, related: Sequence[PlantedPage] = ()) -> str:
    """The page's HTML in its layout; ``related`` pages are linked from the site layout's
    navigation (an exact copy renders its original, so it gets the same links and bytes)."""
    e = html.escape
    article = f"<h1>{e(page.title)}</h1>\n" + "\n".join(f"<p>{e(p)}</p>"
                                                         for p in page.paragraphs)
    if page.layout == "print":
        body = (f'<nav class="print-banner"><a href="/">Planted corpus</a> &raquo; print'
                f' view</nav>\n<div class="print-body">\n<article class="print">\n{article}\n'
                f'</article>\n</div>\n<footer class="print-footer">Printed from the planted '
                f"corpus.</footer>")
    elif page.layout == "mobile":
        body = ('<header class="m-top"><nav class="m-menu"><a href="/">Home</a> '
                '<a href="/m/">Menu</a> <a href="/search">Search</a></nav></header>\n'
                f'<main class="m-main"><article>\n{article}\n</article></main>\n'
                '<footer class="m-foot"><a href="/">Desktop site</a></footer>')
    else:
        links = "".join(f'<li><a href="{e(r.path)}">{e(r.title)}</a></li>' for r in related)
        body = ('<header><p class="brand">Planted corpus</p><nav><ul><li><a href="/">Home</a>'
                '</li><li><a href="/about.html">About</a></li></ul>'
                f"<ul class=\"related\">{links}</ul></nav></header>\n"
                f"<main><article>\n{article}\n</article></main>\n"
                "<footer><p>Copyright the planted corpus. All rights reserved.</p></footer>")
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{e(page.title)}</title>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def planted_site(base_url: str, seed: int = 0, originals: int = DEFAULT_ORIGINALS,
                 distinct: int = DEFAULT_DISTINCT
                 ) -> tuple[dict[str, DemoResponse], dict[str, Truth]]:
    """The corpus as one host serves it and its ground truth.

    Args:
        base_url: the host's base URL, ``http://127.0.0.1:PORT`` (no trailing slash).
        seed: makes texts, edits and slugs reproducible.
        originals: number of originals (each gets one copy of each copy kind).
        distinct: number of distinct pages on the original template.

    Returns:
        (request-target -> response, URL -> Truth). The truth covers the planted pages, not
        ``/`` or ``/robots.txt``.
    """
    pages = planted_pages(seed, originals, distinct)
    by_path = {p.path: p for p in pages}
    site_pages = [p for p in pages if p.kind in (ORIGINAL, DISTINCT)]
    responses: dict[str, DemoResponse] = {}
    for i, page in enumerate(pages):
        source = by_path[page.original] if page.kind == EXACT and page.original else page
        at = site_pages.index(source) if source in site_pages else i
        related = [site_pages[(at + k) % len(site_pages)] for k in (1, 2, 3)] \
            if source.layout == "site" and site_pages else []
        body = render(source, related).encode()
        links = tuple(base_url + r.path for r in related) if source.layout == "site" else ()
        responses[page.path] = DemoResponse(200, HTML_TYPE, body, links=links)
    index = "".join(f'<li><a href="{html.escape(p.path)}">{html.escape(p.title)}</a></li>'
                    for p in pages)
    responses["/"] = DemoResponse(200, HTML_TYPE, (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Planted corpus'
        f"</title></head><body><h1>Planted corpus</h1><ul>{index}</ul></body></html>\n"
    ).encode(), links=tuple(base_url + p.path for p in pages))
    responses["/robots.txt"] = DemoResponse(200, "text/plain; charset=utf-8", ROBOTS_TXT)
    truth = {base_url + p.path: Truth(p.kind, base_url + p.original if p.original else None)
             for p in pages}
    return responses, truth


class PlantedSite:
    """The planted corpus served on one loopback address, with its request log and truth.

    Example::

        with PlantedSite().start() as site:
            crawl([site.seed_url])
            assert {h.path for h in site.requests()} >= {urlsplit(u).path for u in site.truth}
    """

    def __init__(self) -> None:
        self._servers = LoggedServers()
        self._responses: dict[str, DemoResponse] = {}
        self.base_url = ""
        self.truth: dict[str, Truth] = {}

    def start(self, address: str = "127.0.0.1", port: int = 0, *, seed: int = 0,
              originals: int = DEFAULT_ORIGINALS, distinct: int = DEFAULT_DISTINCT,
              coding: str | None = "gzip") -> PlantedSite:
        """Binds and serves; returns ``self``.

        Raises:
            RuntimeError: already started.
            OSError: the address or port cannot be bound.
        """
        if self.base_url:
            raise RuntimeError("a PlantedSite starts once; create a new one")
        self.base_url = self._servers.serve(address, self._reply, port=port, coding=coding,
                                            server="PlantedSite/1.0")
        self._responses, self.truth = planted_site(self.base_url, seed, originals, distinct)
        return self

    @property
    def seed_url(self) -> str:
        return self.base_url + "/"

    def response(self, path: str) -> DemoResponse:
        """What the server answers ``path`` with (before content-coding)."""
        return self._responses.get(path) or not_found_response(path)

    def requests(self) -> list[Hit]:
        """Requests answered so far, ordered by start time."""
        return self._servers.hits()

    def stop(self) -> None:
        self._servers.stop()

    def __enter__(self) -> PlantedSite:
        return self if self.base_url else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _reply(self, request: RequestView) -> Reply:
        if not self._responses:  # a request before start() returned
            return Reply(503, b"starting", "text/plain")
        response = self.response(request.target)
        return Reply(response.status, response.body, response.content_type)
