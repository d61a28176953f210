"""``crawler explain URL``: why a URL would or would not be crawled.

The operator's question "why was this URL not crawled?" is answered by replaying, for one URL,
the decisions the pipeline takes on it, in the order the host's frontier takes them
(``transforms.frontier.hostcore.HostCore.accept``): canonicalization (an invalid URL never reaches a
host), the host policy and its overrides, every URL filter, the page budget, and robots.txt. The
result also shows the keys the URL is stored and scheduled under, the priority it would be
queued with and the delay between requests to its host.

:func:`explain` is pure: it takes the policy, the robots.txt rules (from ``--robots-file`` or
:func:`fetch_robots_rules`, the one network call) and the clock. :func:`run_explain` is the
command: it loads the inputs, prints the text or JSON form and returns the exit code (0: would
be crawled, 1: would not, 2: bad input).

Not replayed, because they depend on the running crawl's state: the host's page count against
its budget (in the hosts table), whether the URL was seen before, the host's queue bound and
back-off, and the SSRF guard (it resolves the host when the URL is fetched).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from pipeline.ops.learned_rules import RulesOf, learned_section
from pipeline.policy_source import load_policy_file
from transforms.core.content import ACCEPT_ENCODING
from transforms.core.filters import FilterResult, check_url
from transforms.core.policy import (
    DEFAULT_POLICY,
    SUPPORTED_SCHEMES,
    Policy,
    PolicyError,
    policy_summary,
)
from transforms.core.robots import (
    MODE_ALLOW_ALL,
    MODE_DISALLOW_ALL,
    ROBOTS_MAX_BYTES,
    ROBOTS_MAX_REDIRECTS,
    RobotsRules,
    product_token,
    rules_from_response,
)
from transforms.core.schedule import politeness_delay
from transforms.core.url_keys import politeness_key, robots_url
from transforms.core.urls import InvalidUrl, canonicalize_url
from transforms.formats.rowkeys import row_key

DEFAULT_USER_AGENT = "beam-crawler/0.1"  # the pipeline's --crawl_user_agent default
ROBOTS_TIMEOUT = 10.0  # seconds for the whole robots.txt fetch of `crawler explain`
# Schemes whose robots.txt `crawler explain` fetches; for others pass --robots-file.
FETCHED_SCHEMES = frozenset({"http", "https"})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
BUDGET_NOTE = ("the host's page count lives in the running crawl's hosts table "
               "(crawler ls --host): not checked here")
_LIST_SHOWN = 8  # list values in the text form are cut after this many items


@dataclass(frozen=True)
class RobotsDecision:
    """What robots.txt says about the URL.

    Attributes:
        source: where the rules came from (``file robots.txt``, ``fetched``).
        url: the robots.txt URL of the URL's host.
        mode: ``parsed``, ``allow_all`` or ``disallow_all`` (``transforms.core.robots``).
        status: the HTTP status of the fetch, None without a response (or from a file).
        error: why the fetch failed, or ``""``.
        agent: the product token the rules were matched against.
        allowed: whether that agent may fetch the URL.
        crawl_delay: the ``Crawl-delay`` of the agent's group in seconds, or None.
        sitemaps: the ``Sitemap`` URLs.
        summary: the decision in words, e.g. ``unreachable -> disallow all (RFC 9309)``.
    """

    source: str
    url: str
    mode: str
    status: int | None
    error: str
    agent: str
    allowed: bool
    crawl_delay: float | None
    sitemaps: tuple[str, ...]
    summary: str


@dataclass(frozen=True)
class Explanation:
    """Everything ``crawler explain`` reports about one URL; fields the URL did not get that
    far for (an invalid URL has no keys) are None or empty.

    Attributes:
        input: the URL as given.
        canonical: its canonical form under the host's policy, or None when invalid.
        invalid: the ``InvalidUrl`` reason and detail, or None.
        politeness_key: the host queue the URL belongs to (``example.com``, ``h:8081``).
        row_key: the URL's webtable row key.
        user_agent: the user agent the crawler sends to this host (the policy's, else ours).
        overrides: the policy entries applied on top of the defaults, in order.
        policy: the resolved host policy (``policy_summary``).
        overridden: the fields of ``policy`` that differ from the policy's defaults.
        depth: the link depth asked about.
        seed_priority: the request priority asked about.
        filters: every filter's decision, in the order the pipeline runs them.
        budget: the host's page budget, max_pages_per_host (its count is the running
            crawl's, ``BUDGET_NOTE``).
        robots: the robots.txt decision, or None when not checked.
        priority: the priority the URL is queued with (seed priority + the host's boost).
        delay: seconds between requests to the host: max(min_delay, Crawl-delay).
        crawled: whether the URL would be crawled (as far as this replay can tell).
        reason: the first reason it would not be, or ``""``.
    """

    input: str
    canonical: str | None
    invalid: str | None
    politeness_key: str | None
    row_key: str | None
    user_agent: str
    overrides: tuple[str, ...]
    policy: Mapping[str, object]
    overridden: tuple[str, ...]
    depth: int
    seed_priority: int
    filters: tuple[FilterResult, ...]
    budget: int | None
    robots: RobotsDecision | None
    priority: int | None
    delay: float | None
    crawled: bool
    reason: str

    @property
    def verdict(self) -> str:
        """``would be crawled`` or ``would NOT be crawled: <first reason>``."""
        return "would be crawled" if self.crawled else f"would NOT be crawled: {self.reason}"


def explain(url: str, policy: Policy, robots: RobotsRules | None, user_agent: str, depth: int,
            priority: int, now: float, robots_source: str = "") -> Explanation:
    """Replays the pipeline's decisions on ``url``.

    Args:
        url: the URL as an operator would give it (need not be canonical).
        policy: the crawl policy (``DEFAULT_POLICY`` or ``load_policy(FILE)``).
        robots: the rules of the URL's host, or None when robots.txt was not checked.
        user_agent: the pipeline's user agent (``--crawl_user_agent``); a host policy's
            ``user_agent`` takes its place for that host, as in the pipeline.
        depth: the URL's link depth (seeds are 0).
        priority: the request priority (seeds: ``crawler seed --priority``).
        now: the current time in seconds since the epoch (the calendar trap's "today").
        robots_source: where ``robots`` came from, for display.
    """
    try:
        # The host (and so its policy) does not depend on the parameter rules; the policy's
        # parameter rules then give the canonical form the frontier sees.
        key = politeness_key(canonicalize_url(url, allowed_schemes=SUPPORTED_SCHEMES))
        hp = policy.for_host(key)
        canonical = canonicalize_url(url, allowed_schemes=SUPPORTED_SCHEMES,
                                     remove_params=hp.remove_params, sort_query=hp.sort_query)
        keys = (politeness_key(canonical), row_key(canonical), robots_url(canonical))
    except InvalidUrl as error:
        return Explanation(
            input=url, canonical=None, invalid=str(error), politeness_key=None, row_key=None,
            user_agent=user_agent, overrides=(), policy={}, overridden=(), depth=depth,
            seed_priority=priority, filters=(), budget=None, robots=None, priority=None,
            delay=None, crawled=False, reason=f"invalid URL: {error}")

    summary = policy_summary(hp)
    defaults = policy_summary(policy.defaults)
    overridden = tuple(k for k, v in summary.items() if defaults.get(k) != v)
    agent_string = hp.user_agent or user_agent
    filters = tuple(check_url(canonical, depth, hp, now))
    decision = (None if robots is None else
                _robots_decision(robots, canonical, keys[2], product_token(agent_string),
                                 robots_source))
    crawl_delay = decision.crawl_delay if decision is not None else None

    reason = ""
    failed = next((f for f in filters if not f.passed), None)
    if failed is not None:
        reason = f"filter {failed.name}: {failed.reason} ({failed.detail})"
    elif decision is not None and not decision.allowed:
        reason = f"robots.txt: {decision.summary}"
    return Explanation(
        input=url, canonical=canonical, invalid=None, politeness_key=keys[0], row_key=keys[1],
        user_agent=agent_string, overrides=policy.applied_overrides(key), policy=summary,
        overridden=overridden, depth=depth, seed_priority=priority, filters=filters,
        budget=hp.max_pages_per_host, robots=decision, priority=priority + hp.priority_boost,
        delay=politeness_delay(hp.min_delay, crawl_delay), crawled=not reason, reason=reason)


def _robots_decision(rules: RobotsRules, url: str, rules_url: str, agent: str,
                     source: str) -> RobotsDecision:
    allowed = rules.allows(url, agent)
    why = f" ({rules.error})" if rules.error else ""
    if rules.mode == MODE_DISALLOW_ALL:
        if rules.status is None:
            summary = f"unreachable{why} -> disallow all (RFC 9309)"
        else:
            summary = f"status {rules.status}{why} -> disallow all (RFC 9309: unreachable)"
        if allowed:  # robots.txt itself
            summary += "; robots.txt itself is always allowed"
    elif rules.mode == MODE_ALLOW_ALL:
        summary = f"status {rules.status}{why} -> allow all (RFC 9309: unavailable)"
    else:
        summary = f"{'allowed' if allowed else 'disallowed'} for {agent}"
    return RobotsDecision(source, rules_url, rules.mode, rules.status, rules.error, agent,
                          allowed, rules.crawl_delay(agent), rules.sitemaps(), summary)


def explanation_dict(e: Explanation) -> dict[str, Any]:
    """``e`` as a JSON-serializable dict, with its verdict."""
    out = dataclasses.asdict(e)
    out["policy"] = dict(e.policy)
    if e.budget is not None:
        out["budget"] = {"max_pages_per_host": e.budget, "checked": False, "note": BUDGET_NOTE}
    out["verdict"] = e.verdict
    return out


def format_explanation(e: Explanation) -> str:
    """``e`` as the text ``crawler explain`` prints, one section per decision."""
    lines = [f"input            {e.input}"]
    if e.canonical is None:
        lines += [f"canonical        invalid URL: {e.invalid}", "", f"verdict: {e.verdict}"]
        return "\n".join(lines)
    lines += [f"canonical        {e.canonical}",
              f"politeness key   {e.politeness_key}",
              f"row key          {e.row_key}",
              "",
              "host policy      " + " + ".join(("defaults", *e.overrides))]
    for name, value in e.policy.items():
        mark = "  (override)" if name in e.overridden else ""
        lines.append(f"  {name:<34} {_value(value)}{mark}")

    lines += ["", f"filters (depth {e.depth})",
              f"  {'filter':<23} {'result':<6}  {'reason':<22} detail"]
    for f in e.filters:
        lines.append(f"  {f.name:<23} {'pass' if f.passed else 'FAIL':<6}  {f.reason or '-':<22} "
                     f"{f.detail or '-'}".rstrip())
    lines += [f"  {'budget':<23} {'?':<6}  {'-':<22} max_pages_per_host {e.budget}",
              f"  {'':<23} {'':<6}  {'':<22} {BUDGET_NOTE}", ""]

    r = e.robots
    if r is None:
        lines.append(f"robots.txt       not checked (explain fetches it over "
                     f"{' and '.join(sorted(FETCHED_SCHEMES))} only: pass --robots-file)")
    else:
        delay = "none" if r.crawl_delay is None else f"{r.crawl_delay} s"
        lines += [f"robots.txt       {r.url} ({r.source})",
                  f"  {'mode':<14} {r.mode}" + ("" if r.status is None or r.source != "fetched"
                                                 else f" (status {r.status})"),
                  f"  {'user agent':<14} {r.agent} (product token of {e.user_agent})",
                  f"  {'allowed':<14} {'yes' if r.allowed else 'no'}: {r.summary}",
                  f"  {'crawl-delay':<14} {delay}",
                  f"  {'sitemaps':<14} {', '.join(r.sitemaps) or 'none'}"]
    boost = e.policy.get("priority_boost", 0)
    delay_note = ("" if r is None or r.crawl_delay is None
                  else f", Crawl-delay {r.crawl_delay}")
    lines += ["",
              f"priority         {e.priority} (seed {e.seed_priority} + host boost {boost}); "
              "queued by priority, then depth",
              f"delay            {e.delay} s between requests (min_delay "
              f"{e.policy.get('min_delay')}{delay_note})",
              "",
              f"verdict: {e.verdict}"]
    return "\n".join(lines)


def _value(value: object) -> str:
    if isinstance(value, list):
        shown = ", ".join(str(v) for v in value[:_LIST_SHOWN])
        more = f", ... ({len(value)} in all)" if len(value) > _LIST_SHOWN else ""
        return f"[{shown}{more}]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hands every redirect back to the caller, which follows same-host ones itself."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


def _rules_of(status: int, response: Any) -> RobotsRules:
    """The rules of a robots.txt response: the body read raw up to the fetcher's limit."""
    body = response.read(ROBOTS_MAX_BYTES + 1)
    return rules_from_response(status, body[:ROBOTS_MAX_BYTES], time.time(),
                               content_encoding=response.headers.get("Content-Encoding"),
                               cut=len(body) > ROBOTS_MAX_BYTES)


def fetch_robots_rules(url: str, timeout: float = ROBOTS_TIMEOUT,
                       user_agent: str = DEFAULT_USER_AGENT) -> RobotsRules:
    """Fetches the robots.txt of ``url``'s host once, as the pipeline's fetcher does.

    Same-host redirects are followed up to ``ROBOTS_MAX_REDIRECTS`` hops; a longer chain or a
    redirect to another host reads as "unavailable" (allow all), no response as "unreachable"
    (disallow all). No proxy is used: the crawler connects directly.

    Args:
        url: any URL of the host (http or https).
        timeout: seconds for each request (connect and each read).
        user_agent: the ``User-Agent`` header to send.

    Raises:
        InvalidUrl: when ``url`` cannot be canonicalized.
    """
    target = robots_url(url)
    host = politeness_key(target)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    for _ in range(ROBOTS_MAX_REDIRECTS + 1):
        # The pipeline's fetcher accepts gzip and deflate, so a server may compress; the body
        # is read raw and decoded by rules_from_response, with the cap on the decoded text.
        request = urllib.request.Request(target, headers={"User-Agent": user_agent,
                                                          "Accept-Encoding": ACCEPT_ENCODING})
        try:
            with opener.open(request, timeout=timeout) as response:
                return _rules_of(response.status, response)
        except urllib.error.HTTPError as response:
            with response:
                location = response.headers.get("Location")
                if response.code not in _REDIRECT_STATUSES or not location:
                    return _rules_of(response.code, response)
        except (OSError, http.client.HTTPException, ValueError) as error:  # URLError: OSError
            return rules_from_response(None, None, time.time(), f"{type(error).__name__}: "
                                       f"{getattr(error, 'reason', error)}")
        try:
            target = canonicalize_url(urljoin(target, location))
        except InvalidUrl as error:
            return rules_from_response(None, None, time.time(), f"bad redirect: {error}")
        if politeness_key(target) != host:
            return rules_from_response(404, None, time.time(), "cross-host redirect")
    return rules_from_response(404, None, time.time(), "too many redirects")


def run_explain(url: str, *, policy_file: str | None = None, robots_file: str | None = None,
                user_agent: str | None = None, depth: int = 0, priority: int = 0,
                as_json: bool = False, timeout: float = ROBOTS_TIMEOUT,
                rules_of: RulesOf | None = None) -> int:
    """The ``crawler explain`` command: prints the explanation of ``url``.

    Returns:
        0 when the URL would be crawled, 1 when not, 2 on bad input (an unreadable or invalid
        policy file, an unreadable robots file, a negative depth).
    """
    if depth < 0:
        print(f"--depth must be >= 0, got {depth}", file=sys.stderr)
        return 2
    user_agent = user_agent or DEFAULT_USER_AGENT
    now = time.time()
    try:
        policy = load_policy_file(policy_file) if policy_file else DEFAULT_POLICY
    except PolicyError as error:
        print(f"invalid policy: {error}", file=sys.stderr)
        return 2
    robots: RobotsRules | None = None
    source = ""
    if robots_file:
        try:
            body = Path(robots_file).read_bytes()
        except OSError as error:
            print(f"cannot read --robots-file: {error}", file=sys.stderr)
            return 2
        robots, source = rules_from_response(200, body, now), f"file {robots_file}"
    else:
        # The first pass finds the host, its policy's user agent and the robots.txt URL.
        first = explain(url, policy, None, user_agent, depth, priority, now)
        if first.canonical is not None and _scheme(first.canonical) in FETCHED_SCHEMES:
            robots, source = fetch_robots_rules(first.canonical, timeout,
                                                first.user_agent), "fetched"
    e = explain(url, policy, robots, user_agent, depth, priority, now, robots_source=source)
    doc, text = explanation_dict(e), format_explanation(e)
    if rules_of is not None and e.canonical is not None and e.politeness_key is not None:
        learned, lines = learned_section(e.canonical, rules_of(e.politeness_key))
        doc.update(learned)
        text += "\n" + "\n".join(lines)
    print(json.dumps(doc) if as_json else text)
    return 0 if e.crawled else 1


def _scheme(url: str) -> str:
    return url.partition(":")[0]
