"""HTML reports and SVG charts of a job's runs, and of several deployments side by side.

Pure drawing and rendering: plain data in (infercost.reports.data), SVG and HTML text out,
so the API can run it in a thread and tests can check it without a database.
"""
