"""The `softnet` command's entry point: a Ctrl-C while the command line
modules load (half a second on a slow host, before anything is changed)
ends it quietly, as a Ctrl-C later does."""
import signal
import sys


def _early_interrupt(signum, frame):
    sys.stderr.write("softnet: interrupted (nothing was changed)\n")
    raise SystemExit(130)


def main() -> None:
    old = signal.signal(signal.SIGINT, _early_interrupt)
    from softnet.cli.main import main as run

    signal.signal(signal.SIGINT, old)
    run()
