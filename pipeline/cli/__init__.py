"""The ``crawler`` command line: ``pipeline.cli.main`` and one module per command group."""
