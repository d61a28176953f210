# The README's two commands: `make crawl` (optionally URLS="https://...") and `make test`.
# Both create the virtualenv and install the pinned requirements on first use, and build Beam's
# Prism runner from the Go module proxy (pipeline.runners.prism; without `go`, a notice).
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt setup.py | cksum | cut -d' ' -f1)

.PHONY: install crawl test lint down flink-up flink-down clean bench bench-stages bench-profile \
	bench-backlog bench-batches bench-analysts bench-soak prism

$(STAMP): requirements.txt requirements-dev.txt setup.py
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

## Beam's Prism runner at the installed Beam's version: go install into .crawler/bin (once).
prism: $(STAMP)
	$(VENV)/bin/python -m pipeline.runners.prism

## Starts the local stack, serves the demo site (or crawls URLS), runs the crawl, prints a summary.
crawl: $(STAMP) prism
	$(VENV)/bin/crawler crawl $(URLS) $(ARGS)

## Lint and type-check, then the whole test suite (unit, transforms, integration with the emulators).
test: $(STAMP) prism
	$(VENV)/bin/python -m benchmarks.testbed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q -rs $(PYTEST_ARGS)

## The end-to-end comparison with Scrapy on Debian's documentation sites served by nginx (both
## installed with apt on first use; needs root or sudo), 3 repetitions, ours on the DirectRunner,
## Prism and an embedded Flink in the same run: results/e2e.{json,md,png}.
bench: $(STAMP) prism
	$(VENV)/bin/python -m benchmarks.testbed --full
	$(VENV)/bin/python -m benchmarks.e2e --repeat 3 --out-dir results

## Per-stage microbenchmarks (link extraction, canonicalization, robots, per-link cost) with the
## peers in the same process; the sinks (WARC to GCS, rows to Bigtable) on the emulators; the
## frontier DoFn's per-element work (state coding + HostCore) without the runner.
bench-stages: $(STAMP)
	$(VENV)/bin/python -m benchmarks.stages --repeat 3 --out results/stages.json
	$(VENV)/bin/python -m benchmarks.sinks --repeat 3 --out results/sinks.json
	$(VENV)/bin/python -m benchmarks.frontier_bench --repeat 3 --out results/frontier.json

## Where the crawler's CPU goes: py-spy over an unthrottled crawl of the test bed -> results/profile.md
bench-profile: $(STAMP)
	$(VENV)/bin/python -m benchmarks.testbed --full
	$(VENV)/bin/python -m benchmarks.profile_crawl --out-dir results

## One host's backlog growing to a million queued URLs: pages/s and CPU per page by decile, RSS,
## state bytes per page, and a second job's resume time -> results/backlog.json.
bench-backlog: $(STAMP)
	$(VENV)/bin/python -m benchmarks.backlog --out results/backlog.json

## Client batches against plain seeding: 100 batches of 1,000 URLs over 20 local hosts, crawled
## both ways; the crawler's CPU per URL (goal: batches at most 10% above), pages/s, and the done
## notification's delay after each batch's last URL -> results/batches.json.
bench-batches: $(STAMP)
	$(VENV)/bin/python -m benchmarks.batches --out results/batches.json $(ARGS)

## Issue 15's cost: the e2e crawl (unthrottled, the documentation sites) by the crawler before it
## (commit f41468e, from a temporary git worktree) and now, alternating, 3 repetitions each: the
## ratio now/before of pages/s (goal: at least 0.85) and CPU per page -> results/analysts_e2e.json.
bench-analysts: $(STAMP)
	$(VENV)/bin/python -m benchmarks.testbed --full
	$(VENV)/bin/python -m benchmarks.analysts_e2e --full --repeat 3 --out results/analysts_e2e.json $(ARGS)

## Memory over a long crawl: 50,000 pages of generated hosts with traps and dead links plus a faults
## host, unthrottled, on the DirectRunner and on embedded Flink; RSS every 5 s (goals: under 20 KB
## per page after the first 5,000 pages, peak under 600 MB) -> results/soak{,-flink}.{json,png}.
## ARGS=--trace adds tracemalloc's top holders at 1,000 and 10,000 pages (slower).
bench-soak: $(STAMP)
	-$(VENV)/bin/python -m benchmarks.soak --pages 50000 --out-dir results --max-slope-kb 20 --max-peak-mb 600 $(ARGS)
	$(VENV)/bin/python -m benchmarks.soak --pages 50000 --runner flink --out-dir results --max-slope-kb 20 --max-peak-mb 600 $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

down: $(STAMP)
	$(VENV)/bin/crawler local down

## A local Flink session cluster (a JobManager and a TaskManager; Flink from PyPI, installed into
## .crawler/flink on first use) for `crawler run --runner=FlinkRunner --flink_master=127.0.0.1:PORT`.
flink-up: $(STAMP)
	$(VENV)/bin/crawler flink up

flink-down: $(STAMP)
	$(VENV)/bin/crawler flink down

clean:
	rm -rf $(VENV) .crawler .pytest_cache .ruff_cache .mypy_cache *.egg-info
