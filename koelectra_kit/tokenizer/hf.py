"""A saved tokenizer as a transformers tokenizer: ``KoElectraKitTokenizer``, registered with ``AutoTokenizer`` when
``koelectra_kit`` is imported (``koelectra_kit.hub.repo.hf_hook``), and named in every saved tokenizer_config.json.

    import koelectra_kit
    from transformers import AutoTokenizer, pipeline
    tok = AutoTokenizer.from_pretrained("runs/sentiment")           # same ids and offsets as KoTokenizer
    pipeline("text-classification", model="runs/sentiment")("재밌어요")

Without this class transformers reads tokenizer.json alone and feeds raw text to WordPiece, skipping the
normalizer and the Kiwi pre-split: the ids are wrong and labels degrade silently. So the encoding here is
``KoTokenizer``'s, delegated (not re-implemented), and transformers' own code only assembles the result: special
tokens, truncation, padding, tensors. Without ``import koelectra_kit`` the folder fails to load with a message
naming the package (``saving.HF_LOAD_GUARD``). Never ``trust_remote_code``: the code is this installed package.
"""
from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer, BatchEncoding, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

from .config import SETTINGS_FILE
from .core import KoTokenizer
from .saving import HF_TOKENIZER_CLASS, SPECIAL_TOKENS_MAP, model_max_length

# from_pretrained keyword arguments passed on to the tokenizer; the loaders' own (cache_dir, _from_pipeline,
# trust_remote_code, ...) are not tokenizer settings
_PASSED_ON = ("model_max_length", "truncation_side", "model_input_names")


class KoElectraKitTokenizer(PreTrainedTokenizerFast):
    """``PreTrainedTokenizerFast`` whose text encoding is a ``KoTokenizer``'s (normalize -> Kiwi pre-split ->
    WordPiece; offsets into the text as given). Single texts and pairs ([CLS] a [SEP] b [SEP]); ``truncation``
    left unset truncates to ``model_max_length`` (the model cannot take more than it was trained with, and the
    predictor truncates the same way); ``is_split_into_words=True`` takes pieces already pre-split
    (``KoTokenizer.presplit_batch``) straight to the subword model. No overflowing windows (``stride``)."""

    vocab_files_names = {"tokenizer_file": "tokenizer.json"}
    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    padding_side = "right"

    def __init__(self, ko: KoTokenizer | None = None, **kwargs):
        if not isinstance(ko, KoTokenizer) or ko.hf is not None:
            raise TypeError("build KoElectraKitTokenizer with from_pretrained(folder) or from_ko(KoTokenizer) on a "
                            "folder saved by koelectra-kit")
        self.ko = ko
        kwargs.pop("padding_side", None)  # the saved value is the load guard, not a side
        kwargs.pop("tokenizer_object", None)
        super().__init__(tokenizer_object=ko.backend, **SPECIAL_TOKENS_MAP, padding_side="right",
                         clean_up_tokenization_spaces=False, **kwargs)

    @classmethod
    def from_ko(cls, ko: KoTokenizer, **kwargs) -> "KoElectraKitTokenizer":
        return cls(ko, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *init_inputs, **kwargs) -> "KoElectraKitTokenizer":
        """A folder saved by koelectra-kit (a tokenizer, or a model folder carrying one), or a hub repo pushed
        by it. Loader-only arguments (revision, cache_dir, trust_remote_code, ...) are ignored."""
        from ..hub.repo import koelectra_snapshot

        name = str(pretrained_model_name_or_path)
        folder = Path(name)
        if not (folder / SETTINGS_FILE).is_file():
            snapshot = koelectra_snapshot(name, SETTINGS_FILE)
            if snapshot is None:
                raise OSError(f"{name}: no koelectra-kit tokenizer ({SETTINGS_FILE} + tokenizer.json) here or on "
                              "the hub")
            folder = snapshot
        ko = KoTokenizer.from_pretrained(folder)
        passed = {k: kwargs[k] for k in _PASSED_ON if kwargs.get(k) is not None}
        passed.setdefault("model_max_length", model_max_length(folder))
        return cls(ko, name_or_path=name, **passed)

    def save_pretrained(self, save_directory, legacy_format=None, filename_prefix=None, push_to_hub=False,
                        **kwargs) -> tuple[str, ...]:
        """The ``KoTokenizer`` files (tokenizer_config.json names this class); other files in the folder stay."""
        if push_to_hub or filename_prefix:
            raise ValueError("KoElectraKitTokenizer.save_pretrained: no push_to_hub or filename_prefix; save, then "
                             "push the folder (koelectra_kit.hub.repo.push_folder)")
        d = self.ko.save(save_directory)
        return tuple(str(p) for p in sorted(d.iterdir()) if p.name in (
            "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json", SETTINGS_FILE))

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs) -> list[str]:
        enc = self.ko.encode_batch([text] + ([pair] if pair is not None else []), truncation=False,
                                   add_special_tokens=False, return_offsets=False, return_tokens=True)
        tokens = [t for toks in enc["tokens"] for t in toks]
        return [self.cls_token, *tokens, self.sep_token] if add_special_tokens else tokens

    def _decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool | None = None,
                **kwargs) -> str:
        """``KoTokenizer.decode``: byte tokens and jamo back to their characters (transformers' own decode showed
        the fallback's tokens, "존잼<0xF0><0x9F><0x91><0x8D>", and left jamo unjoined). ``[UNK]`` stays."""
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if isinstance(token_ids, dict):
            token_ids = token_ids["input_ids"]
        text = self.ko.decode(list(token_ids), skip_special_tokens=skip_special_tokens)
        clean = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else clean_up_tokenization_spaces
        return self.clean_up_tokenization(text) if clean else text

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return self.ko.decode(self.convert_tokens_to_ids(tokens), skip_special_tokens=False)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 3 if pair else 2

    def _get_padding_truncation_strategies(self, padding=False, truncation=None, max_length=None, *args, **kwargs):
        # unset truncation -> model_max_length: transformers' default (none) crashes a model past its positions
        if truncation is None and max_length is None:
            truncation = True
        return super()._get_padding_truncation_strategies(padding, truncation, max_length, *args, **kwargs)

    def _encode_plus(self, text, text_pair=None, add_special_tokens: bool = True,
                     padding_strategy=PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE, max_length=None, stride: int = 0,
                     is_split_into_words: bool = False, pad_to_multiple_of=None, padding_side=None,
                     return_tensors=None, return_token_type_ids=None, return_attention_mask=None,
                     return_overflowing_tokens: bool = False, return_special_tokens_mask: bool = False,
                     return_offsets_mapping: bool = False, return_length: bool = False, verbose: bool = True,
                     **kwargs) -> BatchEncoding:
        if is_split_into_words:  # pieces already pre-split: what tokenizer.json alone expects
            return super()._encode_plus(
                text, text_pair, add_special_tokens, padding_strategy, truncation_strategy, max_length, stride,
                is_split_into_words, pad_to_multiple_of, padding_side, return_tensors, return_token_type_ids,
                return_attention_mask, return_overflowing_tokens, return_special_tokens_mask, return_offsets_mapping,
                return_length, verbose, **kwargs)
        if return_overflowing_tokens or stride:
            raise NotImplementedError("KoElectraKitTokenizer: no overflowing windows (stride / "
                                      "return_overflowing_tokens); split long texts before encoding")
        batched = isinstance(text, (list, tuple))
        firsts = self._encoded(list(text) if batched else [text])
        seconds = None
        if text_pair is not None:
            seconds = self._encoded(list(text_pair) if batched else [text_pair])
        rows = [self._assemble(a, seconds[i] if seconds else None, add_special_tokens, truncation_strategy,
                               max_length) for i, a in enumerate(firsts)]
        want = {"input_ids": True, "attention_mask": return_attention_mask is not False,
                "token_type_ids": (return_token_type_ids if return_token_type_ids is not None
                                   else "token_type_ids" in self.model_input_names),
                "special_tokens_mask": return_special_tokens_mask, "offset_mapping": return_offsets_mapping}
        data = self._pad_rows(rows, padding_strategy, max_length, pad_to_multiple_of, padding_side or self.padding_side)
        data = {k: v for k, v in data.items() if want.get(k)}
        if return_length:
            data["length"] = [len(ids) for ids in data["input_ids"]]
        if not batched and return_tensors is None:
            data = {k: v[0] for k, v in data.items()}
        return BatchEncoding(data, tensor_type=return_tensors, n_sequences=2 if text_pair is not None else 1)

    def _encoded(self, texts: list) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """(ids, offsets) per text, no special tokens, untruncated: KoTokenizer's encoding."""
        enc = self.ko.encode_batch(texts, truncation=False, add_special_tokens=False, return_offsets=True)
        return [(ids, [tuple(o) for o in offs]) for ids, offs in zip(enc["input_ids"], enc["offsets"])]

    def _assemble(self, a, b, add_special: bool, strategy, max_length) -> dict:
        """One row: truncated the way transformers' strategies do, then [CLS] a [SEP] (b [SEP])."""
        (ia, oa), (ib, ob) = a, (b if b is not None else ([], []))
        strategy = TruncationStrategy(strategy)
        if strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None:
            budget = max(0, max_length - (self.num_special_tokens_to_add(b is not None) if add_special else 0))
            ka, kb = len(ia), len(ib)
            if strategy == TruncationStrategy.ONLY_FIRST:
                ka = max(0, budget - kb)
            elif strategy == TruncationStrategy.ONLY_SECOND:
                kb = max(0, budget - ka)
            else:  # longest_first: take from the longer one, one token at a time
                while ka + kb > budget:
                    if ka > kb:
                        ka -= 1
                    else:
                        kb -= 1
            left = self.truncation_side == "left"
            ia, oa = (ia[len(ia) - ka:], oa[len(oa) - ka:]) if left else (ia[:ka], oa[:ka])
            ib, ob = (ib[len(ib) - kb:], ob[len(ob) - kb:]) if left else (ib[:kb], ob[:kb])
        cls_, sep, z = ([self.cls_token_id], [self.sep_token_id], [(0, 0)]) if add_special else ([], [], [])
        ids = cls_ + ia + sep + ((ib + sep) if b is not None else [])
        second = len(ib) + len(sep) if b is not None else 0
        return {"input_ids": ids, "token_type_ids": [0] * (len(ids) - second) + [1] * second,
                "attention_mask": [1] * len(ids),
                "special_tokens_mask": [1] * len(cls_) + [0] * len(ia) + [1] * len(sep)
                + (([0] * len(ib) + [1] * len(sep)) if b is not None else []),
                "offset_mapping": z + oa + z + ((ob + z) if b is not None else [])}

    def _pad_rows(self, rows: list[dict], strategy, max_length, multiple, side: str) -> dict:
        """Column lists, padded to the batch's longest or max_length (rounded up to ``multiple``)."""
        strategy = PaddingStrategy(strategy)
        longest = max((len(r["input_ids"]) for r in rows), default=0)
        target = {PaddingStrategy.LONGEST: longest, PaddingStrategy.MAX_LENGTH: max_length or longest}.get(strategy)
        if target is not None and multiple:
            target = -(-target // multiple) * multiple
        fill = {"input_ids": self.pad_token_id, "token_type_ids": self.pad_token_type_id, "attention_mask": 0,
                "special_tokens_mask": 1, "offset_mapping": (0, 0)}
        out = {k: [] for k in fill}
        for r in rows:
            n = max(0, (target or 0) - len(r["input_ids"]))
            for k, v in fill.items():
                out[k].append(([v] * n + r[k]) if side == "left" else (r[k] + [v] * n))
        return out


def register() -> None:
    """Make ``AutoTokenizer`` (and so ``pipeline``) find the class by the name tokenizer_config.json gives. Keyed by
    the class name, not a model config: registering it for ElectraConfig would hijack every ELECTRA on the hub."""
    AutoTokenizer.register(HF_TOKENIZER_CLASS, fast_tokenizer_class=KoElectraKitTokenizer, exist_ok=True)


assert KoElectraKitTokenizer.__name__ == HF_TOKENIZER_CLASS  # the saved name is the class's name
