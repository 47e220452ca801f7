"""The Semrush simulator: an in-memory fake of the upstream write APIs (SPEC §5.1)."""

from provisioning.simulator.server import LANGUAGES, Language, SemrushSimulator, language_id

__all__ = ["LANGUAGES", "Language", "SemrushSimulator", "language_id"]
