"""Typed run configs: a dataclass per stage, filled from YAML plus dotted ``key=value`` overrides.

    cfg = load_config(PretrainConfig, "configs/pretrain/tiny.yaml", ["model.hidden_size=64", "out=runs/x"])

An unknown key or a value of the wrong type is a ``ConfigError`` (one line, names the key and the
allowed keys), never a silent default. Nested dataclasses are addressed with dots (``model.num_layers``).
A YAML file may say ``base: other.yaml`` (relative to itself) to start from another preset.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .errors import ConfigError

T = TypeVar("T")


def _type_name(tp: Any) -> str:
    """A union member as a user writes its values: a tri-state ``bool | Literal["auto"]`` reads "true/false or
    auto" (its type names, "bool or Literal", named no choice the user could type)."""
    if tp is bool:
        return "true/false"
    if typing.get_origin(tp) is typing.Literal:
        return " or ".join(map(str, typing.get_args(tp)))
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; allow only lossless coercions (int -> float)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as e:
                errors.append(str(e))
        if len(errors) == 1:  # X | None: X's own message names the item at fault (teacher_weights[0])
            raise ConfigError(errors[0])
        raise ConfigError(f"{key}: expected {' or '.join(_type_name(a) for a in args)}, got {value!r}")
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value is False and "none" in allowed:  # `ensemble=false` (or YAML's off/no) says "none" the usual way
            return "none"
        if value not in allowed:
            raise ConfigError(f"{key}: expected one of {list(allowed)}, got {value!r}")
        return value
    if origin in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            # A single value where a list is expected: accept it as a one-element list (corpus=a.txt).
            value = [value]
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a section of keys, got {value!r}")
        return _build(tp, value, prefix=f"{key}.")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp in (int, float) and isinstance(value, str):
        try:  # YAML 1.1 reads "1e5" (no dot) as a string; numbers are what was meant
            value = float(value)
        except ValueError:
            pass
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):  # nan passes every range check below it and trains on NaN, silently
                raise ConfigError(f"{key}: expected a finite number, got {value!r}")
            return float(value)
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)  # 1e5 in YAML is a float; accept it for integer knobs like max_steps
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, os.PathLike):  # a pathlib.Path from Python: saved as its text (json.dumps refuses Path)
            return os.fspath(value)
        if isinstance(value, bool):  # YAML 1.1 reads yes/no/on/off/true/false unquoted as a bool, not the word
            raise ConfigError(f"{key}: expected a string, got {value!r} (YAML reads yes, no, on, off, true and false "
                              "as true/false: quote the word, e.g. labels=['no','yes'])")
        if value is None and key.endswith("]"):  # a list's item: labels=[null,hate] meant the word, as yes/no do
            raise ConfigError(f"{key}: expected a string, got None (YAML reads null and ~ as no value: quote the "
                              "word, e.g. labels=['null','hate'])")
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(cls: type[T], data: dict, prefix: str = "") -> T:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _hints(cls)
    kwargs = {}
    # old key -> current key (``RENAMED``): old configs and commands keep working (load_config renamed each layer)
    for key, value in _new_names(cls, data, prefix).items():
        if key not in fields:
            raise ConfigError(unknown_key_message(prefix + key, list(fields), prefix))
        kwargs[key] = _coerce(value, hints[key], prefix + key)
        if key == "seed" and isinstance(kwargs[key], int) and not 0 <= kwargs[key] < 2**32:
            # numpy's generators take 0 <= seed < 2**32: -1 ended deep in a split with numpy's traceback
            raise ConfigError(f"{prefix}seed={kwargs[key]}: a seed is a whole number from 0 to {2**32 - 1}")
    obj = cls(**kwargs)
    if hasattr(obj, "validate"):
        obj.validate()
    return obj


_NOTICED: set[str] = set()


def _notice_renamed(old: str, new: str) -> None:
    if old not in _NOTICED:  # once per process: a key read from a checkpoint's config must not repeat it
        _NOTICED.add(old)
        from .runtime import warn

        warn(f"note: config key '{old}' is now '{new}' (the old name still works)")


def unknown_key_message(key: str, allowed: list[str], prefix: str) -> str:
    leaf = key[len(prefix):]
    close = difflib.get_close_matches(leaf, allowed, n=1)
    hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
    return f"unknown config key '{key}'{hint}; allowed: {', '.join(prefix + a for a in allowed)}"


def _merge(base: dict, update: dict) -> dict:
    out = dict(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def check_cores(value: int | None, key: str) -> None:
    """A thread or worker count at most the machine's cores (None or 0: the default, all of them). More is never
    faster for this CPU-bound work, and a mistyped threads=100000 started threads until the system refused one
    (OpenBLAS's message, then a segfault); Kiwi's workers are processes."""
    import os

    cores = os.cpu_count() or 1
    if value is not None and value > cores:
        raise ConfigError(f"{key}={value}: this machine has {cores} cores; give at most {cores} (or leave it out "
                          "for all of them)")


MAX_BATCH = 4096  # texts per model call, at most: label, suggest, the app, evaluate, ensemble, distill's teachers


def check_batch_cap(value: int | None, key: str) -> None:
    """At most MAX_BATCH texts per model call: activations grow with the batch (attention with its square length)
    while speed stops growing after a few hundred texts; a mistyped 100000 would only end in the kernel's OOM kill."""
    if value is not None and value > MAX_BATCH:
        raise ConfigError(f"{key}={value} is more than {MAX_BATCH} texts per model call: memory grows with it, speed "
                          "does not (128-512 is the usual best)")


def check_not_blank(obj: Any, keys: tuple[str, ...]) -> None:
    """Optional string keys (a column, a path, an encoding) given as nothing or spaces: ``text_column=`` or ``--out
    "$DIR"`` with the variable unset. "" read as "not given" switched to the default silently (auto-detected
    columns, print-only evaluate), and " " named a folder called " " in the working folder: one line instead."""
    for key in keys:
        value = getattr(obj, key)
        if isinstance(value, str) and not value.strip():
            raise ConfigError(f"{key}={value!r} is empty (an unset shell variable?): give a value, or leave {key} "
                              "out for its default")


def preset_path(name: str | Path, stage: str | None = None) -> Path:
    """A config file path, or the name of a shipped preset (``cpu-30min``, ``pretrain/cpu-30min``, with or
    without ``.yaml``) looked up in the package's presets for ``stage``. Paths win over names."""
    path = Path(name)
    if path.is_file():
        return path
    from importlib import resources

    try:
        root = resources.files("koelectra_kit.presets")
    except ModuleNotFoundError:  # a checkout on PYTHONPATH, not installed (a lent GPU machine): configs/ beside it
        root = Path(__file__).resolve().parent.parent / "configs"
    stem = path.name[:-5] if path.name.endswith(".yaml") else path.name
    stages = [path.parent.name] if path.parent.name else ([stage] if stage else [])
    for st in stages:
        cand = root / st / f"{stem}.yaml"
        if cand.is_file():
            return Path(str(cand))
    folder = root / stages[0] if stages else None
    if len(path.parts) <= 2 and folder is not None and folder.is_dir():
        shipped = sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))
        raise ConfigError(f"config file not found: {name} (not a file, nor a shipped {stages[0]} preset; "
                          f"presets: {', '.join(shipped)})")
    if len(path.parts) == 1 and folder is not None:  # `label --config cpu-30min`: a pretrain preset's name
        raise ConfigError(f"config file not found: {name} (not a file; {stages[0]} ships no presets: give a YAML "
                          "file of its keys)")
    raise ConfigError(f"config file not found: {name}")


def read_yaml(path: str | Path, stage: str | None = None, _seen: tuple[Path, ...] = (), cls: type | None = None) -> dict:
    """Read a config YAML (a path, or a shipped preset's name for ``stage``), following ``base:`` chains; with
    ``cls``, each file's renamed keys under their new names before it is merged over its base (``_new_names``)."""
    path = preset_path(path, stage)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if path.resolve() in _seen:
        raise ConfigError(f"{path}: its base: chain comes back to it ({' -> '.join(p.name for p in _seen)} -> "
                          f"{path.name}); a config's base must end in one that has none")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_ConfigLoader) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)  # where an editor shows it (PyYAML counts from 0)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        why = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML{at} ({why})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text (a config is a YAML file saved as UTF-8)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    base = data.pop("base", None)
    if base is not None and (not isinstance(base, str) or not base.strip()):
        raise ConfigError(f"{path}: base: {base!r} should be the file name of the config it builds on "
                          "(base: gpu-10min.yaml)")
    if base:
        beside = path.parent / base
        # a file beside this one, else a shipped preset's name for the command (`base: sentiment` in a user's YAML,
        # as --config sentiment names it)
        where = beside if beside.is_file() or not stage else preset_path(base, stage)
        data = _merge(read_yaml(where, stage, (*_seen, path.resolve()), cls), _new_names(cls, data) if cls else data)
    elif cls:
        data = _new_names(cls, data)
    return data


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, refusing a key written twice in one mapping: the last one silently won
    (``vocab_size: 2000`` then, further down, ``vocab_size: 3000``), where YAML 1.2 makes it an error. Keys that
    ``<<: *anchor`` merges in may be overridden, as YAML means."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line)
                except TypeError:  # an unhashable key: the base class says so
                    continue
                if first != key_node.start_mark.line:
                    lines = f"lines {first + 1} and {key_node.start_mark.line + 1}"
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice ({lines})",
                                                            key_node.start_mark)
        return super().construct_mapping(node, deep)


def parse_overrides(overrides: list[str] | dict | None) -> dict:
    """``["model.hidden_size=64", "corpus=[a.txt,b.txt]"]`` -> nested dict. Values are parsed as YAML. From Python,
    a dict ``{"model.hidden_size": 64}`` says the same with its values as given (not parsed)."""
    out: dict = {}
    if isinstance(overrides, dict):
        for key, value in overrides.items():
            if not isinstance(key, str) or not key.strip():
                raise ConfigError(f"overrides: key {key!r} is not a config key (a dict of 'key': value)")
            _put(out, key.strip(), value, key)
        return out
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, (list, tuple, type(None))):
        # a str was iterated a character at a time ("override 'e' is not key=value")
        raise ConfigError(f"overrides: a list of 'key=value' strings (or a dict of key: value), got {overrides!r}")
    for item in overrides or []:
        if not isinstance(item, str):
            raise ConfigError(f"overrides: a list of 'key=value' strings, got the item {item!r}")
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"override '{item}' has an empty key")
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw  # e.g. a path with a colon: keep the raw string
        _put(out, key, value, item)
    return out


def _put(out: dict, key: str, value, said: str) -> None:
    """``value`` at the dotted ``key`` of the nested ``out`` (``said``: the override as the user gave it)."""
    node = out
    *parents, leaf = key.split(".")
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override '{said}' conflicts with another override")
    node[leaf] = value


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | dict | None = None) -> T:
    """Defaults of ``cls`` <- YAML at ``path`` (or a shipped preset named so, see ``preset_path``) <-
    ``key=value`` overrides; typed and validated. ``cls.STAGE`` names the presets folder to look in. A renamed key
    is renamed in its own layer, so an override's old name overrides the preset's new one."""
    data = read_yaml(path, getattr(cls, "STAGE", None), cls=cls) if path else {}
    data = _merge(data, _new_names(cls, parse_overrides(overrides)))
    cfg = _build(cls, data)
    from .runtime import get_logger

    logger = get_logger()
    if logger.isEnabledFor(logging.DEBUG):  # --verbose, every command: only finetune's recipe said it
        logger.debug(f"resolved config ({getattr(cls, 'STAGE', cls.__name__)}):\n  "
                     + dump_yaml(cfg).rstrip().replace("\n", "\n  "))
    return cfg


def _new_names(cls: type, data: dict, prefix: str = "") -> dict:
    """One layer of a config (a YAML file, the overrides) with its renamed keys under their new names (a notice
    each): renamed after the merge, ``grad_clip=1.0`` against a preset's ``max_grad_norm`` read as both set."""
    renamed = getattr(cls, "RENAMED", {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _hints(cls)
    out = {}
    for key, value in data.items():
        if key in renamed and key not in fields:
            new = renamed[key]
            if new in data:
                raise ConfigError(f"both '{prefix}{key}' and its new name '{prefix}{new}' are set; keep '{prefix}{new}'")
            _notice_renamed(prefix + key, prefix + new)
            key = new
        tp = hints.get(key)
        if isinstance(value, dict) and dataclasses.is_dataclass(tp):
            value = _new_names(tp, value, f"{prefix}{key}.")
        out[key] = value
    return out


def to_dict(cfg: Any) -> dict:
    """A plain dict of a config (for logging the resolved config and saving it in checkpoints)."""
    return dataclasses.asdict(cfg)


def from_dict(cls: type[T], data: dict) -> T:
    return _build(cls, data)


def checked(cfg: Any, cls: type[T], entry: str) -> T:
    """``cfg`` (a ``cls``, or a dict of its keys) typed and validated as ``load_config`` leaves it, for the Python
    entry functions (``finetune()``, ``pretrain()``...): a config built directly or edited with
    ``dataclasses.replace`` skipped every check (max_steps=0 ran unbounded, batch_size=0 ended in ZeroDivisionError,
    a section given as a dict in AttributeError). The round trip through the typed loader is the one set of checks;
    a config that has been through it comes back equal."""
    if isinstance(cfg, cls):
        data = to_dict(cfg)
    elif isinstance(cfg, dict):
        data = cfg
    else:
        name = cls.__name__
        raise ConfigError(f"{entry}() takes a {name} or a dict of its keys, got {type(cfg).__name__} {cfg!r} (e.g. "
                          f"{entry}(load_config({name}, 'config.yaml', ['key=value'])))")
    return _build(cls, data)


def dump_yaml(cfg: Any) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True)
