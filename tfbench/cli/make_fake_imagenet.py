"""`tfbench make_fake_imagenet` (the subcommand's entry point); the library is
tfbench.data.fake_imagenet."""

from tfbench.data.fake_imagenet import main, write_fake_imagenet

__all__ = ["main", "write_fake_imagenet"]
