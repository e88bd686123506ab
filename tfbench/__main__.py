"""`python -m tfbench`: same program as the `tfbench` console script."""

from tfbench.cli import entry_point

if __name__ == "__main__":
    entry_point()
