"""Model cards: the README.md written into every exported discriminator (pretraining) and classifier (fine-tuning)
folder, through ``huggingface_hub``'s ModelCard API so the hub reads its YAML metadata (language, license,
library, pipeline tag, datasets, base model, ``model-index`` with the evaluation numbers of eval.json, exactly).

    card = classifier_card(cfg, result, labels, tok, data_report); write_card(card, folder)

The text says what a user must know before relying on the model: how it was trained (command, data, compute), how
its tokenizer works (the toolkit's needs ``import koelectra_kit``, and ``tokenizer.json`` alone needs pre-split text;
a published checkpoint's own loads in plain transformers), the label set, intended use and limits.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..io.fileio import write_text_atomic
from ..io.hfdata import card_name
from ..io.printed import label_list

LIBRARY = "transformers"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def hub_id_of(source: str | None) -> str | None:
    """``source`` if it names a hub model (not a local folder), else the hub id the local folder's own card
    records as its name (a run pushed with push_to_hub; a run folder's card is its discriminator's); None when
    unknown. The hub's base_model must be a hub id."""
    if not source:
        return None
    path = Path(source)
    if not path.exists():
        return source if _HUB_ID.match(source) else None
    card = path / "README.md"
    if not card.is_file() and (path / "discriminator" / "README.md").is_file():  # init= a run folder
        card = path / "discriminator" / "README.md"
    try:
        from huggingface_hub import ModelCard

        name = getattr(ModelCard.load(card).data, "model_name", None)
    except Exception:  # noqa: BLE001 - no card, or not one of ours: no base_model
        return None
    return name if isinstance(name, str) and _HUB_ID.match(name) else None


def tokenizer_description(tok, where: str) -> str:
    """What the tokenizer does, in a paragraph: the user of the card must know whether it is plain WordPiece.
    ``where``: the folder or hub id the card's code loads."""
    if tok.hf is not None:  # a published checkpoint's own (KcELECTRA's BertTokenizer): tokenizer.json is all of it
        return (f"The checkpoint's own tokenizer, as transformers loads it: `{type(tok.hf).__name__}` "
                f"({type(tok.backend.model).__name__}, {tok.vocab_size:,} tokens, with its own normalization); "
                "koelectra-kit adds no normalization and no Kiwi pre-split. `tokenizer.json` holds all of it: "
                "`AutoTokenizer` and `pipeline` load it with or without `import koelectra_kit`, and readers of "
                "`tokenizer.json` outside Python (transformers.js, optimum) give the same ids.")
    model = {"wordpiece": "WordPiece", "characters": "a character vocabulary (WordPiece over single characters)",
             "unigram": "a sentencepiece unigram model with byte fallback"}.get(tok.model, tok.model)
    presplit = {"kiwi": "Kiwi morpheme pre-split (pieces glued to the previous one carry `##`)",
                "kiwi_word": "Kiwi morpheme pre-split of each word on its own (pieces glued to the previous one carry "
                             "`##`)"}.get(tok.presplit, "no morpheme pre-split")
    versions = {}
    if tok.presplit in ("kiwi", "kiwi_word"):  # the versions the saved koelectra_tokenizer.json records
        versions = tok.kiwi_record()
    pinned = (f" Made with {', '.join(f'{k} {v}' for k, v in versions.items())}: another Kiwi model build can split "
              "some texts differently, so install these versions for identical ids." if versions else "")
    return (f"koelectra-kit's Korean tokenizer: normalization for noisy comments (NFC, control characters removed, "
            f"repeats such as ㅋㅋㅋㅋ cut to 2, whitespace collapsed) → {presplit} → {model}, "
            f"{tok.vocab_size:,} tokens.{pinned} The normalization and pre-split run in Python, so "
            "`tokenizer.json` alone is not enough: `import koelectra_kit` registers the `KoElectraKitTokenizer` "
            "class that `AutoTokenizer` and `pipeline` then use (without the import, loading fails with a message "
            "naming the package; never `trust_remote_code`). Readers of `tokenizer.json` alone (transformers.js, "
            "optimum, the `tokenizers` library) take raw text without complaint but give other ids, so other "
            "predictions: feed them the texts normalized and pre-split by koelectra-kit, "
            f"`KoTokenizer.from_pretrained(\"{where}\").presplit_batch(texts)` "
            "(`from koelectra_kit.tokenizer import KoTokenizer`).")


def _import_line(tok) -> str:
    """The first line of a card's code: the import the toolkit's tokenizer needs; none for a published
    checkpoint's own, which loads in plain transformers."""
    if tok.hf is not None:
        return ""
    return ("import koelectra_kit  # registers the tokenizer class; without it loading fails (by design, never "
            "silently)\n")


def _onnx_section(tok, name: str, max_length: int) -> str:
    """How to feed the ONNX export (``koelectra-kit export --onnx``): its inputs, and where its ids come from."""
    ids = ("`tokenizer.json` on the `presplit_batch` texts (above), never on raw text" if tok.hf is None else
           "`tokenizer.json` (the checkpoint's whole tokenizer)")
    return (f"`koelectra-kit export --model {name} --onnx` (`--int8` for an int8 copy) writes `onnx/model.onnx` "
            "(`onnx/model_quantized.onnx`), where transformers.js and optimum look: inputs `input_ids`, "
            "`attention_mask` and `token_type_ids` (zeros) [batch, sequence], output `logits`. Encode with this "
            f"folder's tokenizer, truncated to {max_length} tokens: in Python `tok = AutoTokenizer.from_pretrained("
            f"\"{name}\")`{' after `import koelectra_kit`' if tok.hf is None else ''}, then `session.run(None, "
            "dict(tok(texts, padding=True, truncation=True, return_tensors=\"np\")))`; elsewhere "
            f"{ids}.")


def _card(data, body: str):
    from huggingface_hub import ModelCard

    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body.strip()}\n")


def write_card(card, folder: str | Path) -> Path:
    """README.md in ``folder``, written beside and renamed into place."""
    path = Path(folder) / "README.md"
    write_text_atomic(path, str(card))
    return path


def _eval_results(report: dict, model_name: str, dataset: str, split: str) -> list:
    from huggingface_hub import EvalResult

    common = dict(task_type="text-classification", task_name="Text classification", dataset_type=dataset,
                  dataset_name=dataset, dataset_split=split)
    return [EvalResult(metric_type="accuracy", metric_name="accuracy", metric_value=report["accuracy"], **common),
            EvalResult(metric_type="f1", metric_name="macro F1", metric_value=report["macro_f1"],
                       metric_args={"average": "macro"}, **common)]


def card_tags(labels: list[str]) -> list[str]:
    """The hub tags: ``sentiment-analysis`` only for a sentiment label set (``metrics.sentiment_roles``: positive and
    negative, perhaps neutral, nothing else); a topic or emotion model is text classification (the pipeline tag)."""
    from .metrics import sentiment_roles

    return ["koelectra-kit", "electra", "korean", *(["sentiment-analysis"] if sentiment_roles(labels) else [])]


def _label_table(report: dict) -> str:
    rows = ["| label | precision | recall | F1 | dev support |", "|---|---|---|---|---|"]
    for lab in report["labels"]:
        c = report["per_class"][lab]
        cell = str(lab).replace("|", "\\|")  # a bare | would end the cell
        rows.append(f"| {cell} | {c['precision']:.3f} | {c['recall']:.3f} | {c['f1']:.3f} | {c['support']} |")
    return "\n".join(rows)


def _limits(report: dict, max_length: int) -> str:
    per = report["per_class"]
    weakest = min(report["labels"], key=lambda lab: per[lab]["f1"])
    neutral = [lab for lab in report["labels"] if lab.lower() in ("neutral", "neu", "중립", "보통")]
    lines = ["- Domain: Korean online reviews and comments like the training data; other registers (news, "
             "formal documents, other languages) were not evaluated.",
             f"- The weakest class on dev is **{weakest}** (F1 {per[weakest]['f1']:.3f}); read its labels with care."]
    if neutral:
        lines.append(f"- **{neutral[0]}** is the hardest kind of class for sentiment models: mixed or lukewarm texts "
                     "sit between the poles, and rating-derived neutral labels are noisy.")
    lines += [f"- Texts are truncated to {max_length} tokens ([CLS] and [SEP] included).",
              "- Sarcasm, slang newer than the data and heavy typos lower accuracy; labels are predictions, "
              "not judgements about people: review them before acting on them."]
    return "\n".join(lines)


def classifier_card(cfg, result: dict, labels: list[str], tok, data_report: dict | None = None):
    """The fine-tuned classifier's card; its model-index numbers are eval.json's dev accuracy and macro-F1."""
    from huggingface_hub import ModelCardData

    report, train = result["dev"], result["train"]
    name = cfg.push_to_hub or Path(cfg.out).name
    datasets = list(cfg.card_datasets) or list(dict.fromkeys(card_name(p) for p in (cfg.train, cfg.dev) if p))
    data = ModelCardData(
        language="ko", license=cfg.card_license, library_name=LIBRARY, pipeline_tag="text-classification",
        tags=card_tags(labels), datasets=datasets,
        base_model=hub_id_of(cfg.model), model_name=name,
        eval_results=_eval_results(report, name, datasets[0], "dev" if cfg.dev else "validation"))
    dr = data_report or {}
    dev_source = dr.get("dev_source", f"file {cfg.dev}" if cfg.dev else f"{cfg.dev_fraction:g} of train")
    refs = result.get("references") or {}
    ref_lines = "".join(f"\n| {k} | {v['accuracy']:.4f} | {v['macro_f1']:.4f} |" for k, v in refs.items()
                        if isinstance(v, dict) and "accuracy" in v)
    body = f"""
# {name}

Korean text classifier ({label_list(labels)}) fine-tuned from `{cfg.model}` with
koelectra-kit.

## Use

```python
{_import_line(tok)}from transformers import pipeline
clf = pipeline("text-classification", model="{name}")
clf("배송 빠르고 좋아요", truncation=True)  # a text past {cfg.max_length} tokens is cut, as in training
# or: from koelectra_kit.classify.classifier import Classifier
#     Classifier.load("{name}").predict(["배송 빠르고 좋아요"]).labels
```

## Labels and dev scores

{_label_table(report)}

Accuracy **{report['accuracy']:.4f}**, macro-F1 **{report['macro_f1']:.4f}** on {report['n']} dev rows
({dev_source}); majority class {report['majority_accuracy']:.4f}.

| reference | accuracy | macro-F1 |
|---|---|---|
| this model | {report['accuracy']:.4f} | {report['macro_f1']:.4f} |{ref_lines}

## Training

- Command: `koelectra-kit finetune --config finetune_config.yaml` (the resolved config, saved beside the model)
- Data: `{cfg.train}` ({train['rows']} training rows{", " + dr['label_source'] if dr.get('label_source') else ""}),
  dev {dev_source}
- Recipe: {train['steps']} steps ({train['epochs']} epochs, {train['stopped']}), best dev macro-F1 at step
  {result['best']['step']}; lr {train['lr']:g} with layer decay {train['layer_decay']:g},
  batch {cfg.batch_size}, max_length {cfg.max_length}
- Compute: {train['device']}, {train['precision']}, {train['threads']} thread(s), {train['train_time_s']:.0f} s of
  training ({train['examples_per_s']:.0f} examples/s), {train['parameters'] / 1e6:.1f}M parameters

## Tokenizer

{tokenizer_description(tok, name)}

## ONNX

{_onnx_section(tok, name, cfg.max_length)}

## Intended use and limits

Sentiment labelling of Korean user texts (reviews, comments) in bulk, with a person reviewing low-confidence rows.

{_limits(report, cfg.max_length)}
"""
    return _card(data, body)


def _pretrain_command(run: dict, corpus: list[str]) -> str:
    """The command line of the run: its data, what it continued from (the same command without init= trains from
    random weights), a tokenizer it was given, an objective other than the default, its folder."""
    parts = [f"prepared={run['prepared']}" if run.get("prepared") else f"corpus=[{','.join(corpus)}]"]
    parts += [f"{key}={run[key]}" for key in ("tokenizer", "init", "init_generator") if run.get(key)]
    if run.get("objective", "electra") != "electra":
        parts.append(f"objective={run['objective']}")
    return " ".join(["koelectra-kit pretrain", *parts, f"out={run.get('out', 'RUN')}"])


def encoder_card(run: dict, metrics: dict | None, tok, n_params: int | None = None):
    """The pretrained discriminator's card. ``run``: the run's resolved config (a dict); ``metrics``: the last
    metrics row. Pretraining has no held-out evaluation, so there is no model-index: its numbers would be training
    numbers; the last row's are quoted in the text as such."""
    from huggingface_hub import ModelCardData

    name = run.get("push_to_hub") or Path(run.get("out") or "discriminator").name
    where = run.get("push_to_hub") or f"{name}/discriminator"  # what loads: the run folder's discriminator/
    corpus = [str(p) for p in run.get("corpus") or []]
    datasets = list(run.get("card_datasets") or []) or list(dict.fromkeys(card_name(p) for p in corpus))
    init, init_generator = run.get("init"), run.get("init_generator")
    data = ModelCardData(language="ko", license=run.get("card_license", "apache-2.0"), library_name=LIBRARY,
                         pipeline_tag="feature-extraction", datasets=datasets or None, model_name=name,
                         base_model=hub_id_of(init), tags=["koelectra-kit", "electra", "korean", "pretraining"])
    seen = " in this run" if init else ""  # (not counting the pretraining of the checkpoint it continued)
    continued = (f", continued from `{init}`" + (f" (generator `{init_generator}`)" if init_generator else "")
                 if init else "")
    m, model = metrics or {}, run.get("model") or {}
    stats = ", ".join(f"{k} {m[k]:.3f}" for k in ("disc_acc", "disc_auc", "gen_acc") if isinstance(m.get(k), float))
    if stats and m.get("step") != run.get("steps", m.get("step")):
        stats += f" (the last logged row, step {m['step']})"
    stop_note = " (stopped before the end of its budget)" if run.get("stopped") == "interrupted" else ""
    steps, tokens = run.get("steps", m.get("step", "?")), run.get("tokens", m.get("tokens", 0))
    body = f"""
# {name}

A Korean ELECTRA discriminator pretrained with koelectra-kit
(objective `{run.get('objective', 'electra')}`){continued}: an encoder to fine-tune, not a finished classifier.

## Use

```python
{_import_line(tok)}from transformers import AutoModel, AutoTokenizer
tok = AutoTokenizer.from_pretrained("{where}"); enc = AutoModel.from_pretrained("{where}")
```
Fine-tune: `koelectra-kit finetune --config sentiment model={where} train=reviews.csv out=CLF`.

## Training

- Command: `{_pretrain_command(run, corpus)}` with the settings below
- Data: {", ".join(f"`{c}`" for c in corpus) or "(not recorded)"}; {tokens:,} tokens seen{seen}
- Model: hidden {model.get('hidden_size')}, {model.get('num_layers')} layers, {model.get('num_heads')} heads,
  sequence length {run.get('seq_len')}{f", {n_params / 1e6:.1f}M parameters" if n_params else ""}
- Recipe: {steps} steps{stop_note}, batch {run.get('batch_size')}, peak lr {run.get('lr')}, schedule
  {run.get('schedule')}; device {run.get('device')}, precision {run.get('precision')}
- Last training-batch statistics (not a held-out evaluation): {stats or "not recorded"}

## Tokenizer

{tokenizer_description(tok, where)}

## Intended use and limits

A starting point for Korean classification of online text like its corpus. Its quality is only known after
fine-tuning: compare against the TF-IDF baseline `koelectra-kit finetune` reports. Texts unlike the corpus (formal
writing, other languages) are out of its domain.
"""
    return _card(data, body)
