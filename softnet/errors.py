"""Errors softnet reports to the user: each names what was wrong and what is accepted."""


class SoftnetError(Exception):
    """Base class: the CLI prints the message and exits non-zero, no traceback."""

    exit_code = 1


class InputError(SoftnetError):
    """Bad user input (option or spec field). Raised before the host is touched."""

    exit_code = 2

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")


class TestbedError(SoftnetError):
    """The host could not be set up or a tool failed; changes are undone."""

    __test__ = False  # not a pytest test class
