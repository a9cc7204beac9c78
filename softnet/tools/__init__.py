"""What softnet starts and changes on a host: the change registry, host
commands, and the process protocol its native tools speak."""
