"""``python -m pipeline [options]``: runs the crawl pipeline (see ``pipeline.main``)."""

from pipeline.main import main

main()
