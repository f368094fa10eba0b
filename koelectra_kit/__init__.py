"""koelectra-kit: Korean ELECTRA toolkit (tokenizer, pretraining, fine-tuning, batch labelling).

Importing the package does two things and stays light (no transformers, no torch): it registers the tokenizer
class with transformers' ``AutoTokenizer`` (``hub.hf_hook``), and it answers the module paths that issue 40 moved
(``koelectra_kit.classifier`` is now ``koelectra_kit.classify.classifier``) for one release, with a
``DeprecationWarning`` naming the new path, through an alias table rather than a stub file per old module (the
top of the package holds only what is cross-cutting; tests/test_layering.py checks it).
"""
__version__ = "0.1.0"

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

from .hub.hf_hook import register_with_transformers as _register_with_transformers

# old module path -> new one, under this package; removed in the release after 0.1
MOVED = {
    "fileio": "io.fileio", "tables": "io.tables", "workbook": "io.workbook", "hfdata": "io.hfdata",
    "corpus": "io.corpus", "plots": "io.plots", "finetune.output": "io.output",
    "modelio": "hub.modelio", "hf_hook": "hub.hf_hook", "normalize": "tokenizer.normalize",
    "electra_cpu": "electra.cpu", "electra_prior": "electra.prior",
    "classifier": "classify.classifier", "tfidf": "classify.tfidf", "ensemble": "classify.ensemble",
    "onnx_backend": "classify.onnx_backend", "predictions": "classify.predictions",
    "references": "classify.references", "metrics": "classify.metrics", "modelcard": "classify.modelcard",
    "evaluate": "classify.evaluate", "baseline": "finetune.baseline", "suggest_file": "suggest.file",
}
# (koelectra_kit.hub, .electra and .suggest are packages now, and re-export the old modules' names: not moved.)


def _moved(old: str, stacklevel: int):
    """The module at an old path's new one, after a DeprecationWarning that names it (``stacklevel``: the frame
    of the code that used the old path; the import system's own frames are skipped by warnings)."""
    new = f"{__name__}.{MOVED[old]}"
    warnings.warn(f"{__name__}.{old} moved to {new}; import it from there (the old path goes in the next release)",
                  DeprecationWarning, stacklevel=stacklevel + 1)
    return importlib.import_module(new)


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import koelectra_kit.OLD`` / ``from koelectra_kit.OLD import x``: the new module, registered in
    sys.modules under the old name too, so each old path warns once and both names are one module object."""

    def find_spec(self, name, path=None, target=None):
        old = name.removeprefix(f"{__name__}.")
        if old == name or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        module = _moved(spec.name.removeprefix(f"{__name__}."), stacklevel=2)
        spec.loader_state = module.__spec__  # the import system sets the old path's spec on the module next
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # the module's own spec back (reload, pickling read it)


def __getattr__(name: str):
    """``koelectra_kit.classifier`` as an attribute (after ``import koelectra_kit``), and
    ``from koelectra_kit import classifier``: the moved module, registered under the old name as the finder does."""
    if name in MOVED:
        module = sys.modules[f"{__name__}.{name}"] = _moved(name, stacklevel=2)
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# first: an old path is an alias by definition, whatever another finder would find under that name
if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())


def _register_tokenizer() -> None:
    from .tokenizer.hf import register

    register()


# AutoTokenizer / pipeline("text-classification") load this toolkit's folders with its tokenizer class
# (koelectra_kit.tokenizer.hf), registered now or as soon as transformers loads its tokenizer mapping.
_register_with_transformers(_register_tokenizer)
