"""The crawl's Beam composites (``transforms/*.py``) and the layers under them: ``core`` (pure
crawl logic), ``formats`` (encodings), ``frontier`` (per-key decisions), ``fetchers`` (asyncio
I/O), ``stores`` (blocking cloud clients). ``tests/unit/test_layout.py`` keeps the layering."""

METRICS_NAMESPACE = "crawler"  # every counter and distribution of the pipeline
