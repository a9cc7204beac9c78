"""softnet: a lab for the Linux packet data path."""
__version__ = "0.1.0"
