"""DUST: canonicalization rules a host learns from duplicate content (pure).

"Do not crawl in the DUST" (Bar-Yossef, Keidar, Schonfeld, 2007): different URLs with the same
text are the commonest trap that URL heuristics miss. A faceted catalogue whose links append each
filter last (``/facet/?color=red&size=m`` and ``/facet/?size=m&color=red``) serves a few hundred
distinct pages under thousands of parameter orders; a tracking parameter the default list does
not know serves one page under as many URLs as it has values.

Exact-duplicate detection (``transforms.duplicates``) sees two URLs of one frontier key with the
same main text and asks :func:`rule_between` what tells them apart:

* only the order of the query parameters: the rule ``sort`` the parameters on that path;
* only one parameter (present in one and not the other, or with another value), everything else
  the same in any order: the rule ``drop`` that parameter on that path.

A rule is one piece of evidence; the key adopts it (:func:`add_evidence`) once
``RULE_SUPPORT`` *distinct* contents showed it, so one page served under many URLs, or two soft
404s that happen to match, never teach a rule on their own. Rules are scoped to the exact path,
so a parameter that matters on another path is never touched. :func:`rewrite` applies the
adopted rules to a URL not yet fetched.

Bounds: at most ``MAX_CANDIDATE_RULES`` rules under evidence per key, each with at most
``RULE_SUPPORT`` digests, and at most ``MAX_RULES`` adopted rules per key; a rule beyond them
is not learned (the crawl stays correct, it only fetches more).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

from transforms.core.records import RULE_DROP, RULE_SORT, UrlRule

RULE_SUPPORT = 2  # distinct contents that must show a rule before the key adopts it
MAX_CANDIDATE_RULES = 32
MAX_RULES = 16
MIN_EVIDENCE_WORDS = 20  # pages with less main text than this are no evidence (error pages)


def rule_id(rule: UrlRule) -> str:
    """A rule as one readable string, e.g. ``sort /facet/`` or ``drop /item ref``."""
    return " ".join(filter(None, (rule.action, rule.path, rule.param)))


def rule_from_id(text: str) -> UrlRule | None:
    """The inverse of :func:`rule_id` (None for a string that is not one)."""
    parts = text.split(" ")
    if len(parts) == 2 and parts[0] == RULE_SORT:
        return UrlRule(parts[1], RULE_SORT)
    if len(parts) == 3 and parts[0] == RULE_DROP and parts[2]:
        return UrlRule(parts[1], RULE_DROP, parts[2])
    return None


def _pieces(query: str) -> list[str]:
    return [p for p in query.split("&") if p]


def _name(piece: str) -> str:
    return unquote(piece.split("=", 1)[0]).lower()


def rule_between(a: str, b: str) -> UrlRule | None:
    """The rule that would make URLs ``a`` and ``b`` (canonical, same content) one URL, or None
    when they differ in more than the query, or in more than one parameter."""
    sa, sb = urlsplit(a), urlsplit(b)
    if (sa.scheme, sa.netloc, sa.path) != (sb.scheme, sb.netloc, sb.path) or a == b:
        return None
    pa, pb = _pieces(sa.query), _pieces(sb.query)
    if sorted(pa) == sorted(pb):
        return UrlRule(sa.path or "/", RULE_SORT)
    only_a = _multiset_minus(pa, pb)
    only_b = _multiset_minus(pb, pa)
    names = {_name(p) for p in only_a + only_b}
    if len(names) == 1:
        name = names.pop()
        if name:
            return UrlRule(sa.path or "/", RULE_DROP, name)
    return None


def _multiset_minus(a: Sequence[str], b: Sequence[str]) -> list[str]:
    rest = list(b)
    out = []
    for piece in a:
        if piece in rest:
            rest.remove(piece)
        else:
            out.append(piece)
    return out


def rewrite(url: str, rules: Iterable[UrlRule]) -> str:
    """``url`` with the rules of its path applied (parameters dropped, then sorted); the URL
    itself when none applies. The pieces are moved, never re-encoded, so a canonical URL stays
    canonical."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    path = parts.path or "/"
    mine = [r for r in rules if r.path == path]
    if not mine:
        return url
    pieces = _pieces(parts.query)
    dropped = {r.param for r in mine if r.action == RULE_DROP}
    if dropped:
        pieces = [p for p in pieces if _name(p) not in dropped]
    if any(r.action == RULE_SORT for r in mine):
        pieces = sorted(pieces, key=lambda p: (_name(p), p))
    return urlunsplit(parts._replace(query="&".join(pieces)))


def add_evidence(evidence: dict[str, list[str]], adopted: list[str], rule: UrlRule,
                 digest: str) -> bool:
    """Records that the content ``digest`` showed ``rule``; returns True when the rule is
    adopted now (it is then in ``adopted``, by :func:`rule_id`, and out of ``evidence``).
    Both containers are the key's state, changed in place and kept within the bounds."""
    key = rule_id(rule)
    if key in adopted:
        return False
    digests = evidence.get(key)
    if digests is None:
        if len(evidence) >= MAX_CANDIDATE_RULES:
            return False
        digests = evidence[key] = []
    if digest not in digests:
        digests.append(digest)
    if len(digests) < RULE_SUPPORT or len(adopted) >= MAX_RULES:
        return False
    del evidence[key]
    adopted.append(key)
    return True


def adopted_rules(adopted: Iterable[str]) -> list[UrlRule]:
    """The key's adopted rules as records (strings that are not rules are skipped)."""
    return [r for r in (rule_from_id(text) for text in adopted) if r is not None]
