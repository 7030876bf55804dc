"""The run report: the funnel as a table and as an HTML page with a plot."""
