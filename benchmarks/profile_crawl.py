"""Where our crawler's CPU goes on the test bed: py-spy samples the pipeline process during an
unthrottled crawl of the documentation sites, and the samples are summed by function (self
time) and by stage (inclusive time of our modules and the libraries under them).

    python -m benchmarks.profile_crawl --out-dir results      (``make bench-profile``)

Writes ``profile.md`` (the tables) and ``profile.txt`` (py-spy's raw collapsed stacks).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from benchmarks.e2e import FULL_REGIMES, REPO, ours_command
from benchmarks.testbed import FULL_SITES, Testbed, host_sites

# (stage, substrings of a frame "function (file:line)"); the first stage found in a stack,
# from the leaf up, gets the sample, so the order of this list does not matter, the stack does.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("HTML parse and link extraction (selectolax, transforms/core/links.py)",
     ("selectolax", "transforms/core/links.py", "transforms/extract.py")),
    ("URL canonicalization and filters", ("transforms/core/urls.py", "transforms/core/filters.py",
                                          "transforms/core/url_params.py")),
    ("robots.txt and robots meta", ("transforms/core/robots.py", "transforms/core/robots_meta.py",
                                    "protego")),
    ("HTTP fetch (aiohttp, asyncio)", ("aiohttp", "asyncio", "transforms/fetchers/http.py",
                                       "transforms/fetchers/service.py")),
    ("WARC writing and GCS upload", ("warcio", "transforms/warc", "gcsio", "google/cloud/storage",
                                     "apache_beam/io/gcp/gcsio")),
    ("Bigtable writes and reads", ("google/cloud/bigtable", "transforms/formats/rows.py",
                                   "transforms/storage.py")),
    ("Pub/Sub publish and pull", ("google/cloud/pubsub", "pubsub_source", "transforms/loop.py",
                                  "apache_beam/io/gcp/pubsub")),
    ("frontier state and timers (hostcore, Bloom filter)",
     ("transforms/frontier/hostcore.py", "transforms/host_frontier.py", "transforms/core/bloom.py",
      "transforms/core/schedule.py", "transforms/recrawl")),
    ("gRPC and protobuf (clients)", ("grpc", "protobuf", "google/api_core")),
    ("coders and pickling", ("apache_beam/coders", "pickle", "dill", "cloudpickle")),
    ("DirectRunner (bundles, watermarks, state, timers)", ("apache_beam/runners",)),
)


def parse_raw(text: str) -> Iterable[tuple[list[str], int]]:
    """py-spy's raw format: ``frame;frame;...;leaf count`` per line, root first."""
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for stage, needles in STAGES:
            if any(n in frame for n in needles):
                return stage
    return "other (interpreter, threads, logging, ...)"


def summarize(text: str, top: int = 15) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    by_stage: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    total = 0
    for frames, count in parse_raw(text):
        total += count
        by_stage[stage_of(frames)] += count
        leaf = frames[-1]
        by_function[leaf.split(":")[0] + ")" if "(" in leaf else leaf] += count
    return total, by_stage.most_common(), by_function.most_common(top)


def markdown(total: int, stages: list[tuple[str, int]], functions: list[tuple[str, int]],
             header: str) -> str:
    lines = [header, "", "| stage (inclusive, innermost match wins) | share of samples |",
             "|---|---|"]
    lines += [f"| {name} | {100 * n / total:.1f}% |" for name, n in stages]
    lines += ["", "| function (self time) | share of samples |", "|---|---|"]
    lines += [f"| `{name}` | {100 * n / total:.1f}% |" for name, n in functions]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default="results")
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--ours-arg", action="append", default=[], metavar="FLAG",
                        help="an extra pipeline flag, e.g. --ours-arg=--runner=PrismRunner")
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    regime = FULL_REGIMES[0]
    hosted = host_sites(FULL_SITES)
    work = Path(tempfile.mkdtemp(prefix="crawl-profile-"))
    raw = out / "profile.txt"
    try:
        with Testbed(hosted, work / "nginx"):
            cmd = [*ours_command(regime, [h.seed_url for h in hosted], work), *args.ours_arg]
            subprocess.run([py_spy, "record", "--format", "raw", "--rate", str(args.rate),
                            "--nonblocking", "-o", str(raw), "--", *cmd], cwd=REPO, check=True,
                           stdout=subprocess.DEVNULL)
    finally:
        subprocess.run([str(Path(sys.executable).with_name("crawler")), "--state-dir",
                        str(work / "state"), "local", "down"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    total, stages, functions = summarize(raw.read_text())
    header = (f"py-spy, {args.rate} samples/s of the pipeline process (threads that are not "
              f"idle, py-spy's default, so shares approximate CPU time) during `crawler crawl` "
              f"of the {len(hosted)} documentation sites, "
              f"regime {regime.name}, cap {regime.max_pages} pages"
              + (f", flags {' '.join(args.ours_arg)}" if args.ours_arg else "")
              + f"; {total:,} samples.")
    text = markdown(total, stages, functions, header)
    (out / "profile.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
