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


class HostNotRestored(TestbedError):
    """An undo step failed: the host is not as it was. The message lists the
    failed steps; `softnet clean` tries what it can find again."""

    exit_code = 3

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("host not restored: " + "; ".join(self.errors) + " (run `softnet clean --check`)")
