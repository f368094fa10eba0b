"""MkDocs hook: the configuration reference (docs/reference.md) generated from the code at build time.

Every command's flags come from its argparse parser (``koelectra_kit.cli.build_parser``) and every config key from
the dataclass the command loads (type, default, and the comment beside or above the field in the source), so the
page cannot drift from the code.

Why a build-time hook and not a script that commits the page plus a staleness test: other people add and rename
config keys all the time; with a committed page each such change would also need a regenerate step, and a test
that fails on a correct change until someone remembers it. Here the build reads the code itself (a new command
is found through its config's STAGE), and ``mkdocs build --strict`` (run by tests/test_docs.py) fails when a
config-driven command's config cannot be found or a field has no default. docs/reference.md in the repository is
the page's frame: GitHub shows the frame, the site shows the tables. ``python docs/hooks/config_reference.py``
prints the generated Markdown.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import json
import re
import textwrap
import tokenize
from pathlib import Path

MARKER = "<!-- config-reference -->"
PAGE = "reference.md"

# A command's config is found by the house convention: the dataclass whose ``STAGE`` ClassVar is the command's
# name (``STAGE = "label"``: the presets folder ``--config NAME`` looks in), so a new command is documented with no
# edit here. The exceptions: command -> (module, class) of the config it loads, or None for flags only.
COMMAND_CONFIGS: dict[str, tuple[str, str] | None] = {
    "tokenizer train": ("koelectra_kit.tokenizer.config", "TokenizerConfig"),  # STAGE "tokenizer"
    "tokenizer words": ("koelectra_kit.tokenizer.config", "WordsConfig"),  # no presets of its own
    "baseline": ("koelectra_kit.finetune.config", "FinetuneConfig"),  # reads the fine-tuning config (baseline.*)
    "prepare": ("koelectra_kit.pretrain.config", "PretrainConfig"),  # pretrain's keys: the same --config serves both
    "app": ("koelectra_kit.app.settings", "AppSettings"),  # set from the flags only (no --config)
    "quickstart": None,  # STAGE.key=value overrides: the keys of tokenizer train, pretrain, finetune and label
}
NOTES = {
    "baseline": "`baseline` reads the fine-tuning config: the same keys as [`finetune`](#koelectra-kit-finetune) (columns, labels, "
                "`rating_map`, dev split, `max_train_rows`, `class_weights`); its own knobs are the `baseline.*` "
                "keys listed there.",
    "quickstart": "`STAGE.key=value` arguments go to one stage's config, with the keys of that stage's own command: "
                  "{stages}.",
    "app": "`AppSettings` is filled from the flags (there is no `--config` or `key=value` for the app).",
}


# -- the source's comments ---------------------------------------------------------------------------------------

def field_comments(cls) -> tuple[dict[str, str], dict[str, str]]:
    """For each field of dataclass ``cls``: the comment beside it plus the comment lines right above it (joined),
    and the section (a ``# --- title`` line) it sits under."""
    lines, _ = inspect.getsourcelines(cls)
    source = textwrap.dedent("".join(lines))
    comments: dict[int, str] = {}  # 1-based line in ``source`` -> comment text
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    src_lines = source.splitlines()
    only_comment = {i for i in comments if src_lines[i - 1].lstrip().startswith("#")}
    tree = ast.parse(source).body[0]
    docs, sections, section = {}, {}, ""
    last = tree.body[0].lineno - 1 if tree.body else 0
    header = set()  # lines of section headers: "# --- title", continued while its brackets are open
    for i in sorted(only_comment):
        if comments[i].startswith("---"):
            text, j = comments[i].lstrip("-").strip(), i
            header.add(i)
            while text.count("(") > text.count(")") and j + 1 in only_comment:
                j += 1
                text += " " + comments[j]
                header.add(j)
            comments[i] = "--- " + text
    for stmt in tree.body:
        for i in range(last + 1, stmt.lineno):  # section headers between the previous statement and this one
            if i in only_comment and comments[i].startswith("---"):
                section = comments[i].lstrip("-").strip()
        last = stmt.end_lineno
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        above, i = [], stmt.lineno - 1
        while i in only_comment and i not in header:
            above.insert(0, comments[i])
            i -= 1
        beside = [comments[j] for j in range(stmt.lineno, stmt.end_lineno + 1) if j in comments
                  and j not in only_comment]
        docs[stmt.target.id] = " ".join(above + beside)
        sections[stmt.target.id] = section
    return docs, sections


# -- formatting --------------------------------------------------------------------------------------------------

def md(text: str) -> str:
    """Source comment -> one Markdown table cell: code spans kept, Markdown and HTML specials escaped outside them."""
    parts = re.split(r"(`[^`]*`)", text.replace("``", "`"))
    out = []
    for k, part in enumerate(parts):
        if k % 2:
            out.append(part.replace("|", "&#124;"))
        else:
            part = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            out.append(re.sub(r"([\\*_\[\]|])", r"\\\1", part))
    return "".join(out)


def type_name(annotation) -> str:
    t = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    m = re.fullmatch(r"Literal\[(.*)\]", t)
    if m:  # the allowed values
        return " \\| ".join("`" + v.strip().strip("\"'") + "`" for v in m.group(1).split(","))
    return md(t)


def value(v) -> str:
    """A default as you would write it in YAML or as key=value."""
    if v is None:
        return "`null`"
    if isinstance(v, bool):
        return f"`{str(v).lower()}`"
    if isinstance(v, str):
        return f"`{v}`" if v else '`""`'
    if isinstance(v, (list, dict)):
        return "`" + json.dumps(v, ensure_ascii=False).replace('"', "") + "`"
    return f"`{v!r}`" if isinstance(v, float) else f"`{v}`"


def default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"config field {f.name} has no default: every key needs one")


def config_tables(cls, prefix: str = "") -> list[str]:
    """One table of ``cls``'s keys, then one per nested section (``model.*``), dotted as on the command line."""
    docs, sections = field_comments(cls)
    nested, rows, out = [], [], []
    current = None
    for f in dataclasses.fields(cls):
        default = default_of(f)
        if dataclasses.is_dataclass(default):
            nested.append((f.name, type(default)))
            continue
        if sections.get(f.name, "") != current:
            current = sections.get(f.name, "")
            if current:
                rows.append(f"| **{md(current)}** | | | |")
        rows.append(f"| `{prefix}{f.name}` | {type_name(f.type)} | {value(default)} | {md(docs.get(f.name, ''))} |")
    renamed = getattr(cls, "RENAMED", {})
    doc = cls.__doc__ or ""
    if doc.startswith(cls.__name__ + "("):  # dataclass's generated signature, not a docstring
        doc = ""
    out.append(f"`{cls.__module__}.{cls.__name__}`" + (": " + " ".join(doc.split()) if doc else ""))
    out.append("")
    if renamed:
        out.append("Old names still accepted (with a notice): " +
                   ", ".join(f"`{old}` → `{new}`" for old, new in renamed.items()) + ".")
        out.append("")
    out += ["| key | type | default | what it does |", "|---|---|---|---|", *rows, ""]
    for name, sub in nested:
        out.append(f"**`{prefix}{name}.*`**: ")
        out += config_tables(sub, f"{prefix}{name}.")
    return out


def flag_table(parser: argparse.ArgumentParser, keys: set[str]) -> list[str]:
    """The parser's flags; ``keys``: the config's keys, so a flag that sets one names it."""
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(a.option_strings) if a.option_strings else (a.metavar or a.dest)
        help_text = (a.help or "") % {"default": a.default, "prog": parser.prog} if a.help else ""
        if a.choices and not isinstance(a.choices, dict):
            help_text = (help_text + "; " if help_text else "") + "one of " + ", ".join(map(str, a.choices))
        key = a.dest if a.option_strings and a.dest in keys else ""
        default = "" if a.default in (None, argparse.SUPPRESS) or isinstance(a, argparse._StoreTrueAction) \
            and a.default is False else value(a.default)
        rows.append(f"| `{name}` | {f'`{key}`' if key else ''} | {default} | {md(help_text)} |")
    if not rows:
        return []
    return ["| flag | config key | default | what it does |", "|---|---|---|---|", *rows, ""]


def stage_classes() -> dict[str, tuple[str, str]]:
    """STAGE -> (module, class) of every dataclass in the package that declares ``STAGE: ClassVar[str] = "..."``
    (read from the source, so nothing is imported but the configs used)."""
    import koelectra_kit

    root = Path(koelectra_kit.__file__).parent
    out = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("koelectra_kit", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for cls in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for stmt in cls.body:
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "STAGE"
                        and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
                    out[stmt.value.value] = (module, cls.name)
    return out


def config_of(name: str, parser: argparse.ArgumentParser, stages: dict) -> tuple[str, str] | None:
    """The config a command loads: COMMAND_CONFIGS, else the class whose STAGE is its name, else none (a command
    with flags only); a command that takes key=value overrides must have one."""
    if name in COMMAND_CONFIGS:
        return COMMAND_CONFIGS[name]
    if name in stages:
        return stages[name]
    if any(a.dest == "overrides" for a in parser._actions):
        raise KeyError(f"docs/hooks/config_reference.py: command {name!r} takes key=value overrides but no config "
                       f"class declares STAGE = {name!r}; declare it, or add the command to COMMAND_CONFIGS")
    return None


def commands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(``tokenizer train``, its parser) for every command and subcommand, in the CLI's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix}{name}"
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield from commands(sub, full + " ")
                else:
                    yield full, sub


def render() -> str:
    from koelectra_kit.cli import build_parser
    from koelectra_kit.cli.quickstart import STAGES

    out = []
    stages = stage_classes()
    for name, parser in commands(build_parser()):
        spec = config_of(name, parser, stages)
        out += [f"## `koelectra-kit {name}`", ""]
        if parser.description:
            out += [" ".join(parser.description.split()), ""]
        if name in NOTES:
            out += [NOTES[name].format(stages=", ".join(f"`{s}`" for s in STAGES)), ""]
        cls = getattr(importlib.import_module(spec[0]), spec[1]) if spec else None
        keys = {f.name for f in dataclasses.fields(cls)} if cls else set()
        out += ["**Flags**", ""] + flag_table(parser, keys)
        if cls and name != "baseline":
            out += ["**Config keys**", ""] + config_tables(cls)
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its {MARKER} line: the generated reference goes there")
    return markdown.replace(MARKER, render())


if __name__ == "__main__":
    print(render())
