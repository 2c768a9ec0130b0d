"""Telemetry: metric definitions and the fast families behind them, structured logs, the HTTP endpoint."""
