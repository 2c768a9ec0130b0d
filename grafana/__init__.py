"""Grafana dashboards built as code; see grafana/build.py."""
