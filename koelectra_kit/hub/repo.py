"""The Hugging Face hub: pushing an exported folder (``push_to_hub=OWNER/NAME`` on pretrain and fine-tune) and
reading back a repo this toolkit pushed.

A push comes after the folder is complete on disk, so a failed push (no network, no token, offline mode) loses
nothing: it is one ``error:`` line naming the folder and the command that pushes it later.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import ConfigError, KitError

# owner/name as the hub spells repo ids: letters, digits, "-", "_", "."; at most 96 characters a part
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# what a tokenizer (and the settings that size it) needs from a repo: not the weights
_TOKENIZER_FILES = ["tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
                    "koelectra_tokenizer.json", "config.json"]


def check_repo_id(repo_id: str | None, key: str = "push_to_hub") -> None:
    """A config's ``push_to_hub`` must be ``owner/name``: checked before training, not after it."""
    if repo_id is not None and (not isinstance(repo_id, str) or not _REPO_ID.match(repo_id)
                                or ".." in repo_id or repo_id.endswith(".git")):
        raise ConfigError(f"{key}={repo_id!r}: give a hub repo id as owner/name (e.g. {key}=me/koelectra-sentiment)")


# the hub's license ids: lowercase, digits, ".", "-", "+" (apache-2.0, cc-by-nc-sa-4.0, openrail++, other). The list
# itself is the hub's and grows, so only the spelling is checked: "Apache 2.0" or "CC BY-SA 4.0" fails the push.
_LICENSE_ID = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")
# a dataset id: "owner/name", or a name alone for the hub's older canonical datasets
_DATASET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


def check_card_metadata(license_id: str, datasets: list[str]) -> None:
    """``card_license`` and ``card_datasets`` as the hub's metadata spells them: checked before training, since
    the hub refuses a card with a malformed one only when the finished model is pushed."""
    if not isinstance(license_id, str) or not _LICENSE_ID.match(license_id):
        raise ConfigError(f"card_license={license_id!r}: give the hub's license id, lowercase (apache-2.0, mit, "
                          "cc-by-sa-4.0, cc-by-nc-4.0, ...; other for a license of your own)")
    for name in datasets:
        if not isinstance(name, str) or not _DATASET_ID.match(name) or ".." in name:
            raise ConfigError(f"card_datasets: {name!r} is not a hub dataset id (owner/name, e.g. e9t/nsmc); leave "
                              "card_datasets out to name the training files instead")


def push_folder(folder: str | Path, repo_id: str, private: bool = False, what: str = "model") -> str:
    """Create ``repo_id`` if needed (``private`` applies to a new repo) and upload ``folder`` into it; returns the
    repo's URL. Raises ``KitError`` with one line when the hub cannot be reached or the user is not logged in."""
    from huggingface_hub import HfApi, constants, get_token

    from ..io.hubreach import unreachable

    folder = Path(folder)
    later = (f"the {what} is saved in {folder}; push it later with `koelectra-kit export --model {folder} "
             f"--push-to-hub {repo_id}`")
    if constants.HF_HUB_OFFLINE:
        raise KitError(f"push_to_hub={repo_id}: HF_HUB_OFFLINE is set, the hub cannot be reached; {later}")
    if get_token() is None:
        raise KitError(f"push_to_hub={repo_id}: no Hugging Face token (run `hf auth login` or set HF_TOKEN); {later}")
    reason = unreachable()  # before create_repo: offline, its retries take tens of seconds
    if reason is not None:
        raise KitError(f"push_to_hub={repo_id}: the hub ({constants.ENDPOINT}) can't be reached from here ({reason}); "
                       f"{later}")
    try:
        api = HfApi()
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model",
                          commit_message=f"koelectra-kit: upload {folder.name}")
    except Exception as e:  # noqa: BLE001 - network, auth, permission: all the user's to fix, in one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise KitError(f"push_to_hub={repo_id}: the upload failed ({first}); {later}") from None
    return str(url)


def koelectra_snapshot(name: str, settings_file: str) -> Path | None:
    """The local copy of a hub repo's tokenizer files when ``name`` is a repo this toolkit saved (it carries
    ``settings_file``, the tokenizer's koelectra_tokenizer.json, passed in: the tokenizer imports this module, not
    the other way round); None for anything else, including no network (the caller then tries transformers,
    which says why it cannot load)."""
    if Path(name).exists() or not _REPO_ID.match(name):
        return None
    try:
        from huggingface_hub import hf_hub_download, snapshot_download

        hf_hub_download(name, settings_file)
        return Path(snapshot_download(name, allow_patterns=_TOKENIZER_FILES))
    except Exception:  # noqa: BLE001 - not ours, not there, or offline: not a koelectra-kit repo as far as we know
        return None
