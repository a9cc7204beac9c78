"""Campaigns over a fleet of testbeds on Dask distributed: each testbed is
a worker resource, the campaign's controller submits its cells and stores
their trials (docs/how-to/fleet.md)."""
