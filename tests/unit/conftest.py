"""Unit tests: no services, and the settings' defaults, built by one factory."""

from tests.support.isolation import isolated_settings
from tests.support.settings_factory import make_settings, settings

__all__ = ["isolated_settings", "make_settings", "settings"]
