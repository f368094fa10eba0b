"""The shipped presets, installed as package data ``koelectra_kit.presets`` (see pyproject.toml): each
YAML's first line is the command that uses it; ``--config NAME`` finds one by name."""
