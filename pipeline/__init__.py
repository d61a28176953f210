"""Pipeline graph, options, local stack and the ``crawler`` command line."""
