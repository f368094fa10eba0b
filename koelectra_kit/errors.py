"""User-facing errors. The CLI prints ``error: <message>`` (one line) and exits 2 for these;
anything else is a bug and keeps its traceback."""


class KitError(Exception):
    """A problem with the user's input, files or settings, explained in one line."""


class ConfigError(KitError):
    """Unknown config key, wrong type, missing or unreadable config file."""


class InputError(KitError):
    """Missing, empty, unreadable or malformed input data."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (Jupyter's interrupt button, a KeyboardInterrupt) stopped a run after it wrote what it had: raised by
    the Python entry functions (``finetune()``, ``pretrain()``) so that the code after the call does not go on with a
    half-trained model as if it were done. ``result``: what the function would have returned (its ``stopped`` says
    "interrupted"); the CLI reads it for its message and exit status 130."""

    def __init__(self, result: dict):
        super().__init__("interrupted: the run wrote what it had; rerun the same call to continue it")
        self.result = result
