"""Prometheus metrics of ``gpuci-tui run``: the registry updated on events, the state gauges computed at scrape time, and the HTTP server."""
