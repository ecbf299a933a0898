"""HTML reports and SVG charts of jobs, and comparisons of several jobs."""
