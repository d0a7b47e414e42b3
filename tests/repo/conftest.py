"""Repository tests: the project's own files agree with the code, on the settings'
defaults (the README's settings table is theirs)."""

from tests.support.isolation import isolated_settings

__all__ = ["isolated_settings"]
