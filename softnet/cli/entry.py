"""The `softnet` command's entry point. Its first act routes Ctrl-C and
SIGTERM to softnet.interrupts for the whole run, so that one arriving while
the command line modules load (half a second on a slow host, before
anything is changed) ends it as one arriving later does, even when the code
it lands in swallows the exception."""
import sys

from softnet import interrupts


def _early_exit(code: int) -> None:
    sys.stderr.write(f"softnet: {'interrupted' if code == 130 else 'terminated'} (nothing was changed)\n")
    # A Ctrl-C that passed through exec() of a string (scipy's imports run some) leaves
    # CPython's "unhandled KeyboardInterrupt" flag set; a clean exec() clears it.
    exec("")
    raise SystemExit(code)


def main() -> None:
    try:
        interrupts.install()
        from softnet.cli.main import main as run

        interrupts.checkpoint("imports")
        interrupts.check()
    except KeyboardInterrupt:
        _early_exit(130)
    except interrupts.Terminated:
        _early_exit(143)
    except Exception:
        # the signal's exception turned into another on its way (a class body's __set_name__
        # raises RuntimeError from it): the signal still ended the command
        if interrupts.received() is None:
            raise
        _early_exit(128 + interrupts.received())
    run()
