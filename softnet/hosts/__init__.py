"""Real hosts over SSH: the inventory, the on-host agent, and the controller
that drives agents (layer above testbed/traffic/collect, below campaign)."""
