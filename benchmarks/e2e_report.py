"""The end-to-end benchmark's report: per-regime medians and ranges, ratios, the markdown
table and the plot (``benchmarks.e2e`` runs the crawls)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CRAWLERS = ("scrapy", "ours", "ours-prism", "ours-flink")
# Our crawler on each local runner (``crawler crawl --runner=...``); "ours" is the DirectRunner.
RUNNER_FLAGS: dict[str, tuple[str, ...]] = {
    "ours": ("--runner=DirectRunner",),
    "ours-prism": ("--runner=PrismRunner",),
    "ours-flink": ("--runner=FlinkRunner", "--flink_master=[local]"),
}
LABELS = {"scrapy": "Scrapy", "ours": "ours (DirectRunner)", "ours-prism": "ours (Prism)",
          "ours-flink": "ours (Flink)"}
OURS = tuple(RUNNER_FLAGS)


@dataclass(frozen=True)
class Regime:
    name: str
    delay: float  # seconds between requests to one host (0: none)
    concurrency: int  # requests in flight per host
    max_pages: int  # both crawlers stop after about this many pages
    timeout: float  # hard limit on one crawler run, seconds
    sites: tuple[str, ...] = ()  # the test bed's sites it crawls (by name; empty: all)
    scope: str = ""  # ours: --scope (empty: a policy with allow_domains, as Scrapy's)

    def bound(self, hosts: int) -> float | None:
        """The ideal pages/s of a politeness-bound crawl: H/d."""
        return hosts * self.concurrency / self.delay if self.delay > 0 else None


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def summarize(runs: Sequence[dict[str, Any]], regimes: Sequence[Regime], hosts: int
              ) -> dict[str, Any]:
    """Median and range per crawler and regime; ours/Scrapy ratios of the medians; the worst
    politeness figure over the repetitions."""
    out: dict[str, Any] = {}
    for regime in regimes:
        per: dict[str, Any] = {}
        for crawler in CRAWLERS:
            mine = [r for r in runs if r["crawler"] == crawler and r["regime"] == regime.name]
            if not mine:
                continue
            m = [r["metrics"] for r in mine]
            gaps = [x["min_gap"] for x in m if x["min_gap"] is not None]
            per[crawler] = {
                "runs": len(mine),
                "pages": _stats([x["pages"] for x in m]),
                "wall_s": _stats([r["usage"]["wall_s"] for r in mine]),
                "crawl_s": _stats([x["crawl_seconds"] for x in m]),
                "pages_per_s": _stats([x["pages_per_s"] for x in m]),
                "pages_per_wall_s": _stats([x["pages"] / r["usage"]["wall_s"]
                                            for x, r in zip(m, mine, strict=True)]),
                "cpu_per_page_ms": _stats([r["cpu_per_page_ms"] or 0.0 for r in mine]),
                "stack_cpu_per_page_ms": _stats([1000 * r["stack_cpu_s"] / max(1, x["pages"])
                                                 for x, r in zip(m, mine, strict=True)]),
                "peak_rss_mb": _stats([r["usage"]["peak_rss_mb"] for r in mine]),
                # The crawler and every process it started (Prism, Flink's JVMs), summed.
                "peak_group_rss_mb": _stats([r["usage"].get("peak_group_rss_mb")
                                             or r["usage"]["peak_rss_mb"] for r in mine]),
                "duplicates": max(x["duplicates"] for x in m),
                "disallowed": max(x["disallowed"] for x in m),
                "max_concurrent": max(x["max_concurrent"] for x in m),
                "min_gap": min(gaps) if gaps else None,
                "robots_first": all(x["robots_first"] for x in m),
                "idle_share": _stats([x.get("max_idle_share", 0.0) for x in m]),
                "loop_latency": [r.get("loop_latency", "") for r in mine],
                "failed_runs": sum(1 for r in mine if r["usage"]["exit_code"] != 0
                                   or r["usage"]["timed_out"]),
            }
        bound = regime.bound(hosts)
        if bound:
            for figures in per.values():
                figures["percent_of_bound"] = round(
                    100 * figures["pages_per_s"]["median"] / bound, 1)
        if "scrapy" in per and "ours" in per:
            ours, peer = per["ours"], per["scrapy"]
            per["ratio_pages_per_s"] = _ratio(ours["pages_per_s"], peer["pages_per_s"])
            per["ratio_cpu_per_page"] = _ratio(ours["cpu_per_page_ms"], peer["cpu_per_page_ms"])
        # Each runner against Scrapy, and the other runners against the DirectRunner.
        per["vs_scrapy"] = {
            c: {"pages_per_s": _ratio(per[c]["pages_per_s"], per["scrapy"]["pages_per_s"]),
                "cpu_per_page": _ratio(per[c]["cpu_per_page_ms"],
                                       per["scrapy"]["cpu_per_page_ms"])}
            for c in OURS if c in per and "scrapy" in per}
        per["vs_direct"] = {
            c: {"pages_per_s": _ratio(per[c]["pages_per_s"], per["ours"]["pages_per_s"]),
                "cpu_per_page": _ratio(per[c]["cpu_per_page_ms"], per["ours"]["cpu_per_page_ms"]),
                "peak_group_rss": _ratio(per[c]["peak_group_rss_mb"],
                                         per["ours"]["peak_group_rss_mb"])}
            for c in OURS[1:] if c in per and "ours" in per}
        per["regime"] = asdict(regime) | {"bound_pages_per_s": bound}
        out[regime.name] = per
    return out


def _ratio(ours: dict[str, float], peer: dict[str, float]) -> float | None:
    return round(ours["median"] / peer["median"], 3) if peer["median"] else None


def _fmt(s: dict[str, float], digits: int = 1) -> str:
    return (f"{s['median']:,.{digits}f} ({s['min']:,.{digits}f}..{s['max']:,.{digits}f})")


def _present(per: dict[str, Any]) -> list[str]:
    return [c for c in CRAWLERS if c in per]


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [f"Run {meta['date']} on {meta['machine']}; {meta['repeat']} repetitions, median "
             f"(min..max); sites: {', '.join(meta['sites'])}.", ""]
    for name, per in summary.items():
        regime = per["regime"]
        crawlers = _present(per)
        ours = [c for c in crawlers if c in OURS]
        head = (f"**{name}**: delay {regime['delay']:g} s, {regime['concurrency']} request(s) "
                f"per host, cap {regime['max_pages']} pages")
        if regime.get("sites"):
            head += f", sites {', '.join(regime['sites'])}"
        if regime.get("scope"):
            head += f", ours with --scope {regime['scope']}"
        if regime["bound_pages_per_s"]:
            head += f", bound H/d = {regime['bound_pages_per_s']:g} pages/s"
        ratio_head = " / ".join(LABELS[c].removeprefix("ours ").strip("()") if len(ours) > 1
                                else "ours" for c in ours) + " vs Scrapy"
        labels = [LABELS[c] if len(ours) > 1 else c.replace("scrapy", "Scrapy") for c in crawlers]
        lines += [head, "", f"| | {' | '.join(labels)} | {ratio_head} |",
                  "|---|" + "---|" * (len(crawlers) + 1)]
        lines.append(_row(per, "pages fetched", "pages", 0))
        lines.append(_row(per, "pages/s while crawling", "pages_per_s", 1, "pages_per_s"))
        if regime["bound_pages_per_s"]:
            lines.append("| % of H/d | " + " | ".join(
                f"{per[c]['percent_of_bound']}%" for c in crawlers) + " | |")
        lines.append(_row(per, "wall time incl. start-up, s", "wall_s", 1))
        lines.append(_row(per, "pages/s over wall time", "pages_per_wall_s", 1))
        lines.append(_row(per, "CPU ms/page (crawler process)", "cpu_per_page_ms", 2,
                          "cpu_per_page"))
        lines.append(_row(per, "CPU ms/page (emulators)", "stack_cpu_per_page_ms", 2))
        lines.append(_row(per, "peak RSS, MB", "peak_rss_mb", 0))
        if len(ours) > 1:
            lines.append(_row(per, "peak RSS with the runner's processes, MB",
                              "peak_group_rss_mb", 0))
        lines.append(_row(per, "idle share of the busiest host's span", "idle_share", 3))
        if any(any(per[c]["loop_latency"]) for c in ours):
            lines.append("| loop latency, per run | " + " | ".join(
                "; ".join(x for x in per[c]["loop_latency"] if x) if c in ours else "-"
                for c in crawlers) + " | |")
        for label, key in (("duplicate fetches", "duplicates"),
                           ("disallowed fetches", "disallowed"),
                           ("max concurrent per host", "max_concurrent"),
                           ("min gap between starts, s", "min_gap"),
                           ("robots.txt first", "robots_first"),
                           ("failed or timed-out runs", "failed_runs")):
            lines.append(f"| {label} (worst run) | " + " | ".join(
                _cell(per[c][key]) for c in crawlers) + " | |")
        if per.get("vs_direct"):
            lines.append("")
            lines.append("Against the DirectRunner (median / median): " + "; ".join(
                f"{LABELS[c]}: pages/s {_ratio_cell(r['pages_per_s'])}, CPU/page "
                f"{_ratio_cell(r['cpu_per_page'])}, peak RSS with the runner "
                f"{_ratio_cell(r['peak_group_rss'])}" for c, r in per["vs_direct"].items()))
        lines.append("")
    return "\n".join(lines)


def _row(per: dict[str, Any], label: str, key: str, digits: int, ratio: str | None = None
         ) -> str:
    crawlers = _present(per)
    cells = [_fmt(per[c][key], digits) for c in crawlers]
    last = "" if ratio is None else " / ".join(
        _ratio_cell(r[ratio]) for r in per.get("vs_scrapy", {}).values())
    return f"| {label} | {' | '.join(cells)} | {last} |"


def _cell(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _ratio_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def plot(runs: Sequence[dict[str, Any]], regimes: Sequence[Regime], path: Path) -> None:
    """Pages fetched over time since launch, one panel per regime, every repetition drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(regimes), figsize=(6 * len(regimes), 4), squeeze=False)
    colors = {"scrapy": "tab:orange", "ours": "tab:blue", "ours-prism": "tab:green",
              "ours-flink": "tab:purple"}
    for ax, regime in zip(axes[0], regimes, strict=True):
        for crawler in CRAWLERS:
            for i, run in enumerate(r for r in runs if r["crawler"] == crawler
                                    and r["regime"] == regime.name):
                xs = [t for t, _ in run["timeline"]]
                ys = [n for _, n in run["timeline"]]
                ax.plot(xs, ys, color=colors[crawler], alpha=0.8,
                        label=LABELS[crawler] if i == 0 else None)
        ax.set_title(f"{regime.name}: delay {regime.delay:g} s, cap {regime.max_pages}")
        ax.set_xlabel("seconds since the crawler was launched")
        ax.set_ylabel("pages fetched (nginx log)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
