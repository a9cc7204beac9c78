"""Reading the TOML files users write (campaign specs, inventories): every
error names the file and the field path, never a traceback."""
from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from softnet.errors import InputError


def read_toml(path: str | Path, what: str) -> dict:
    """The parsed TOML at ``path``; ``what`` names the expected kind of file."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), f"is a folder; expected {what} (TOML)") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not a text file (byte {exc.start} is not UTF-8); "
                                    f"expected {what} (TOML)") from None
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), f"not valid TOML: {exc}") from None


def spec_error(exc: ValidationError, prefix: str = "", names: dict[str, str] | None = None) -> InputError:
    """Every error pydantic found, each naming its field (or, through
    ``names``, the command-line option that set it): the first is the error's field."""
    names = names or {}
    found = []
    for e in exc.errors():
        path = ".".join(str(p) for p in e["loc"]) or "spec"
        # a list item (compare.metrics.0) is set by its list's option
        option = names.get(path) or names.get(".".join(str(p) for p in e["loc"] if not isinstance(p, int)))
        found.append((option or path, e["msg"].removeprefix("Value error, ")))
    (field, message), rest = found[0], found[1:]
    return InputError(prefix + field, "; ".join([message, *(f"{f}: {m}" for f, m in rest)]))
