"""PTransforms, DoFns and the pure crawl logic they wrap (one composite per module)."""
