"""`python -m vppctl` runs the command line."""

from vppctl.cli import main

if __name__ == "__main__":
    main()
