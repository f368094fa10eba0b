"""``koelectra-kit`` command line: one thin file per command in this package.

Each ``cli/<command>.py`` has ``register(subparsers)`` that adds its parser and sets ``func``; the
heavy imports (torch, kiwipiepy) happen inside ``func`` so ``--help`` stays instant.
A ``KitError`` (bad input, bad config) prints one ``error:`` line and exits 2.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import warnings

from ..errors import KitError

COMMANDS = ["tokenizer", "prepare", "pretrain", "finetune", "evaluate", "baseline", "ensemble", "distill", "label", "suggest", "quickstart", "app", "export"]


# Characters that end a line for a terminal or for str.splitlines (and ESC, which starts a terminal's control
# sequence): a file name or cell holding one would turn the one ``error:`` line into two, or into a cursor move.
_LINE_BREAKERS = re.compile("[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r"}


def one_line(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\n``, ``\\x1b``, ``\\u2028``), so that an
    ``error:`` or ``warning:`` message naming a user's odd file stays one line a script can match."""
    return _LINE_BREAKERS.sub(lambda m: _ESCAPES.get(m.group(), repr(m.group())[1:-1]), text)


class Parser(argparse.ArgumentParser):
    """argparse with the toolkit's error contract: one ``error:`` line and exit 2 (argparse's own usage
    dump is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {one_line(message)} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = Parser(
        prog="koelectra-kit",
        description="Korean ELECTRA toolkit: tokenizer -> pretrain -> finetune -> label.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name and e.name.endswith(f"cli.{name}"):
                continue  # a stage not built yet
            raise
        module.register(sub)
    return parser


def add_config_args(p: argparse.ArgumentParser, default_config: str | None = None) -> None:
    """``--config FILE`` plus free ``key=value`` overrides, shared by config-driven commands."""
    p.add_argument("--config", default=default_config, help="YAML config (see configs/)" +
                   (f"; default {default_config}" if default_config else ""))
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="override any config key, dotted for sections (model.hidden_size=64)")
    p.add_argument("--verbose", action="store_true", help="also log the resolved config and other debug lines")


def config_from_args(cls, args, flags: dict | None = None):
    """One dialect for every command: defaults of ``cls`` <- ``--config`` YAML (a path or a shipped preset's
    name) <- ``key=value`` overrides <- the command's own flags that were given (``flags``: config key ->
    value, None for a flag left out)."""
    from ..config import load_config

    extra = [f"{k}={_yaml_value(v)}" for k, v in (flags or {}).items() if v is not None]
    return load_config(cls, args.config, list(args.overrides) + extra)


def _yaml_value(v) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v), ensure_ascii=False)  # a JSON string is a YAML string: quotes, colons, '#' survive


def _version() -> str:
    from .. import __version__

    return __version__


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """The toolkit's own warnings read ``warning: ...`` on one line, like its errors (the default format adds
    the file, line and source of the ``warnings.warn`` call, which means nothing to a user); other libraries'
    keep the default format, whose location does help."""
    out = file or sys.stderr
    if os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
        out.write(f"warning: {one_line(str(message))}\n")
    else:
        out.write(warnings.formatwarning(message, category, filename, lineno, line))


OVERRIDE = re.compile(r"[A-Za-z_][\w.]*=")  # a key=value override, as add_config_args takes them


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parse_args``, except that ``key=value`` overrides may stand on both sides of a flag: argparse gives a
    positional list one run of values, so in ``evaluate --model M references=false --data d.csv text_column=x`` the
    second run was "unrecognized arguments" (argparse's intermixed parsing does not support subcommands). They
    join the overrides in the order given; anything else left over is the usage error it was."""
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all(OVERRIDE.match(a) for a in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _one_process_unless_it_scales(command: str) -> None:
    """Under torchrun every rank runs the command line it was given: for a command that is one process's work
    (finetune: N copies of one fine-tune, all on GPU 0, racing to write one folder) that is N times the work for one
    output, so it is refused before any of it."""
    from ..runtime import TORCHRUN_COMMANDS, world_size

    if command not in TORCHRUN_COMMANDS and world_size() > 1:
        raise KitError(f"{command} runs as one process, and torchrun started {world_size()} (WORLD_SIZE): each "
                       f"would do the same work into the same output; run it without torchrun ("
                       f"{' and '.join(TORCHRUN_COMMANDS)} are the commands that use several processes)")


def _permission_hint(e: OSError) -> str:
    """What to do about a path this user may not read or write (the bare "Permission denied (PATH)" said neither),
    and that a path in the cache is the cache's (tokenizer train and pretrain need one they can write)."""
    if not isinstance(e, PermissionError) or not getattr(e, "filename", None):
        return ""
    from pathlib import Path

    from ..io.fileio import cache_dir

    hint = ": this user may not use it; check its permissions and those of the folders above it (ls -ld)"
    try:
        cache, path = cache_dir().absolute(), Path(e.filename).absolute()
    except KitError:  # no home folder: no default cache to name
        return hint
    if path == cache or cache in path.parents or path in cache.parents:
        hint += ", or set KOELECTRA_CACHE (or the command's cache_dir=) to a folder you can write"
    return hint


def _error(line: str) -> int:
    """Print the one ``error:`` line (also kept for ``--nproc``'s launcher when this is one of its ranks); exit 2."""
    from .launch import note_error

    _close_bars()
    print(line, file=sys.stderr)
    note_error(line)
    return 2


def _close_bars() -> None:
    """Progress bars the failed step left open, closed first (without their last state): the ``error:`` line was
    written after a bar's text on its line ("pre-splitting x.csv:   0%|   error: ..."), so no line began with it."""
    tqdm = sys.modules.get("tqdm.std")
    if tqdm is None:
        return
    terminal = sys.stderr.isatty()
    for bar in list(getattr(tqdm.tqdm, "_instances", ())):
        bar.leave = not terminal  # a terminal's cleared from its line; a log's ended with its line break
        bar.close()


def main(argv: list[str] | None = None) -> int:
    from ..runtime import setup_logging
    from .launch import as_launched_rank

    as_launched_rank()  # (a rank of --nproc: Ctrl-C's meaning, and an end if its launcher goes), before the imports

    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as e:  # --help, --version or a usage error: a status, also when called in-process
        return e.code if isinstance(e.code, int) else 2
    setup_logging(verbose=bool(getattr(args, "verbose", False)))
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        _one_process_unless_it_scales(args.command)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except KitError as e:
        return _error(f"error: {one_line(str(e))}")
    except OSError as e:  # the machine said no (disk full, permission, a path that vanished): the user's to fix
        if os.environ.get("KOELECTRA_DEBUG"):
            raise
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        return _error(one_line(f"error: {e.strerror or e}{where}{_permission_hint(e)}"))
    except KeyboardInterrupt:
        from .launch import note_interrupted

        print("interrupted: outputs already written are complete; rerun with the same command "
              "(and resume where the command supports it) to continue", file=sys.stderr)
        note_interrupted()
        return 130


if __name__ == "__main__":
    sys.exit(main())
