"""The settings by concern, one module per section; `config.settings` imports them in order
(a section may import what it follows from an earlier one, never from a later one)."""
