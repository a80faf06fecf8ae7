"""The program: ``iopilot`` and ``python -m iopilot``."""

from .cli import run


def main() -> None:
    """Run the command line."""
    run()


if __name__ == "__main__":
    main()
