"""Register ``KoElectraKitTokenizer`` with ``AutoTokenizer`` when ``koelectra_kit`` is imported, without importing
transformers then: that import takes ~3 s (torch included) and ``koelectra-kit --help`` must stay instant.

If transformers' tokenizer auto-mapping is already loaded, the class is registered at once; otherwise a one-shot
import hook registers it right after that module first runs, which is before any ``AutoTokenizer.from_pretrained``
or ``pipeline`` call can look the class up (kiwipiepy's ``transformers_addon`` registers on import the same way,
but imports transformers to do it).

What to register is given (``koelectra_kit/__init__.py`` passes the tokenizer's ``register``): the hub package sits
below the tokenizer, which reads hub repos through it, so it must not import the tokenizer back.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings
from typing import Callable

_AUTO_MODULE = "transformers.models.auto.tokenization_auto"


_REGISTER: list[Callable[[], None]] = []  # the function register_with_transformers was given


def _register() -> None:
    try:
        for register in _REGISTER:
            register()
    except Exception as e:  # noqa: BLE001 - a broken registration must not break importing transformers
        warnings.warn(f"koelectra_kit: could not register its tokenizer with transformers' AutoTokenizer ({e}); "
                      "load tokenizers with koelectra_kit.tokenizer.KoTokenizer.from_pretrained", stacklevel=2)


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the auto-mapping module it asks the other finders, then wraps the loader so that
    the registration runs right after the module's own code."""

    def find_spec(self, name, path=None, target=None):
        if name != _AUTO_MODULE:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # one shot, and find_spec below must not find this finder again
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register()

        spec.loader.exec_module = exec_then_register  # this loader object serves this one module
        return spec


def register_with_transformers(register: Callable[[], None]) -> None:
    """Run ``register`` once transformers' tokenizer auto-mapping exists: now, or right after it is imported."""
    _REGISTER[:] = [register]
    if _AUTO_MODULE in sys.modules:
        _register()
    elif not any(isinstance(f, _RegisterAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())
