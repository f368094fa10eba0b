"""Whether the Hugging Face hub can be reached, asked once a process before a hub id (a model, a tokenizer, a
dataset, a push) is looked up.

Offline, huggingface_hub retries every request five times with backoff (25-50 s and a dozen "Retrying" lines per
name) before transformers says it could not connect; a mistyped local path that happens to look like a hub id
(``tokenizer=t1x``) paid that on every run. One quick request through huggingface_hub's own session (its proxies,
its ``HF_ENDPOINT``) tells: when nothing answers, the process (a Python entry call: until it returns, see
``offline_scope``) switches to offline mode, so an id in the local cache still loads at once, and one that is not
fails in one line that says the hub could not be reached (a network problem is named, not hidden).
``HF_HUB_OFFLINE=1`` set by the user skips the question."""
from __future__ import annotations

import contextlib
import os

from ..errors import InputError

PROBE_TIMEOUT_S = 5.0

_answer: list[str | None] = []  # empty: not asked yet; [None]: reachable or offline by choice; [reason]: unreachable


def unreachable() -> str | None:
    """None when the hub answered (any HTTP status) or the user chose offline mode; else why the request failed,
    after switching huggingface_hub (and datasets) to offline mode for the rest of the process."""
    if _answer:
        return _answer[0]
    from huggingface_hub import constants

    reason = None
    if not constants.HF_HUB_OFFLINE:  # what is_offline_mode() reads (a function only in recent huggingface_hub)
        try:
            from huggingface_hub import get_session

            get_session().head(constants.ENDPOINT, timeout=PROBE_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - any transport failure (DNS, refused, timeout, proxy) means offline
            reason = " ".join(str(e).split()) or type(e).__name__
            _go_offline()
    _answer.append(reason)
    return reason


def _offline_state() -> tuple:
    """(huggingface_hub's switch, the environment's, datasets'): what ``_go_offline`` sets."""
    from huggingface_hub import constants

    try:
        import datasets.config

        ds = datasets.config.HF_HUB_OFFLINE
    except ImportError:  # datasets is a dependency, but this module must not need it
        ds = None
    return constants.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE"), ds


def _set_offline_state(state: tuple) -> None:
    from huggingface_hub import constants

    hub, env, ds = state
    constants.HF_HUB_OFFLINE = hub  # is_offline_mode() reads it at each call; transformers asks that function
    if env is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = env  # worker processes started later
    if ds is not None:
        import datasets.config

        datasets.config.HF_HUB_OFFLINE = ds


def _go_offline() -> None:
    _set_offline_state((True, "1", True))


_scopes: list[int] = []  # open offline_scope()s (nested entry calls: the outermost one restores)


@contextlib.contextmanager
def offline_scope():
    """The offline mode an unanswered question switches on lasts until the outermost scope ends (a Python entry
    function's call, ``io.scope.entry_scope``): then the switches are put back and the next call asks again, so a
    notebook whose network came back is not left offline for good. Outside any scope (a CLI command, whose process
    ends with it), the switch lasts for the process, as before."""
    before, asked = _offline_state(), bool(_answer)
    _scopes.append(1)
    try:
        yield
    finally:
        _scopes.pop()
        if not _scopes and not asked and _answer and _answer[0] is not None:  # this call went offline: undone
            _set_offline_state(before)
            _answer.clear()


def in_cache(repo_id: str, repo_type: str = "model") -> bool:
    """Whether a snapshot of ``repo_id`` is in the local hub cache (no network)."""
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id, repo_type=repo_type, local_files_only=True)
        return True
    except Exception:  # noqa: BLE001 - not cached, or not a valid id: either way nothing to load offline
        return False


def named(what: str, name: str) -> str:
    """How a message names the value: ``model=x`` for a config key, ``--model x`` for a flag (export takes flags
    only, where "model=x" named a spelling it does not accept)."""
    return f"{what} {name}" if what.startswith("--") else f"{what}={name}"


def check_reachable(name: str, what: str, repo_type: str = "model") -> None:
    """Before ``name`` is looked up as a hub id: nothing when the hub answers or the id is cached; else one
    ``InputError`` line saying that it is not a local folder and the hub cannot be reached."""
    reason = unreachable()
    if reason is None or in_cache(name, repo_type):
        return
    from huggingface_hub import constants

    raise InputError(f"{named(what, name)}: no such local folder, and the hub ({constants.ENDPOINT}) can't be reached from "
                     f"here to fetch it as a hub id ({reason}); check the path, or download it where there is a "
                     "network (it is then read from the local hub cache)")
