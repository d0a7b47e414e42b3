"""Repository tests: the project's own files agree with the code, on the settings'
defaults (docs/reference/settings.md's table is theirs), built by the unit tier's one factory."""

from tests.support.isolation import isolated_settings
from tests.support.settings_factory import make_settings, settings

__all__ = ["isolated_settings", "make_settings", "settings"]
