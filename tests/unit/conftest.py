"""Unit tests: no services, and the settings' defaults."""

from tests.support.isolation import isolated_settings

__all__ = ["isolated_settings"]
