"""User-facing errors. The CLI prints ``error: <message>`` (one line) and exits 2 for these;
anything else is a bug and keeps its traceback."""


class KitError(Exception):
    """A problem with the user's input, files or settings, explained in one line."""


class ConfigError(KitError):
    """Unknown config key, wrong type, missing or unreadable config file."""


class InputError(KitError):
    """Missing, empty, unreadable or malformed input data."""
