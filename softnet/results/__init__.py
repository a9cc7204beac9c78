"""Typed, versioned results, the DuckDB store with raw files, and its readers."""
