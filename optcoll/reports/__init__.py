"""Reports: optimality-gap reports over instance suites (Markdown, HTML, CSV, JSON, SVG) and the
benchmark report writer (``benchfile``)."""
