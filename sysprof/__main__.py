"""``python -m sysprof``: the same command line as the ``sysprof`` console script."""
from sysprof.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
