"""Model cards in every exported folder (README.md whose YAML the hub's own parser reads, model-index = eval.json)
and push_to_hub without a network: one error line, exit 2, the local folder complete."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from koelectra_kit.cli import main

TINY_FINETUNE = Path(__file__).resolve().parent.parent / "configs" / "finetune" / "tiny.yaml"


def load_card(folder: Path):
    from huggingface_hub import ModelCard

    return ModelCard.load(folder / "README.md")


def test_classifier_card_metadata_matches_eval_json(finetuned_dir):
    card = load_card(finetuned_dir)
    data, evaluation = card.data, json.loads((finetuned_dir / "eval.json").read_text(encoding="utf-8"))
    assert (data.language, data.library_name, data.pipeline_tag) == ("ko", "transformers", "text-classification")
    assert data.license == "apache-2.0" and data.datasets == ["reviews_labelled"]
    metrics = {r.metric_type: r.metric_value for r in data.eval_results}
    assert metrics == {"accuracy": evaluation["dev"]["accuracy"], "f1": evaluation["dev"]["macro_f1"]}
    assert all(r.task_type == "text-classification" for r in data.eval_results)
    text = card.text
    for needed in ("import koelectra_kit", "finetune_config.yaml", "negative", "neutral", "positive", "Kiwi",
                   "Intended use and limits", f"{evaluation['train']['rows']} training rows"):
        assert needed in text, needed
    # the pipeline call truncates as the classifier does (a folder from a published checkpoint crashes past 512
    # tokens without it); tokenizer.json alone needs the toolkit's pre-split (tests/test_onnx.py runs the recipe)
    assert 'clf("배송 빠르고 좋아요", truncation=True)' in text
    assert 'KoTokenizer.from_pretrained("sentiment").presplit_batch(texts)' in text


def test_encoder_card_parses_and_describes_the_run(tiny_run):
    card = load_card(tiny_run / "discriminator")
    assert (card.data.language, card.data.pipeline_tag) == ("ko", "feature-extraction")
    assert card.data.datasets == ["comments"]
    assert "comments.txt" in card.text and "import koelectra_kit" in card.text and "steps" in card.text
    # its code loads the folder the model is in (RUN/discriminator), not the run folder
    assert f'AutoModel.from_pretrained("{tiny_run.name}/discriminator")' in card.text
    assert f"model={tiny_run.name}/discriminator" in card.text
    assert "continued from" not in card.text and card.data.base_model is None and "init=" not in card.text
    assert not (tiny_run / "generator" / "README.md").exists()  # one card, on the encoder users fine-tune


def test_base_model_is_a_hub_id_or_left_out(tmp_path):
    from koelectra_kit.classify.modelcard import hub_id_of

    assert hub_id_of("monologg/koelectra-small-v3-discriminator") == "monologg/koelectra-small-v3-discriminator"
    assert hub_id_of(str(tmp_path)) is None  # a local folder is no base_model for the hub...
    (tmp_path / "README.md").write_text("---\nlanguage: ko\nmodel_name: me/ko-encoder\n---\n# x\n", encoding="utf-8")
    assert hub_id_of(str(tmp_path)) == "me/ko-encoder"  # ...unless its card names the repo it was pushed to


def test_a_continued_runs_card_says_what_it_continued_and_its_command_does_the_same(tiny_run, tmp_path):
    """The card's command left out init= and init_generator= (following it trained from random weights), the card
    never said the run continued a checkpoint, and a hub checkpoint was no base_model."""
    from koelectra_kit.classify.modelcard import encoder_card
    from koelectra_kit.tokenizer import KoTokenizer

    tok = KoTokenizer.from_pretrained(tiny_run / "discriminator")
    run = {"out": str(tmp_path / "ko-more"), "corpus": ["my_comments.txt"], "steps": 3, "tokens": 1000,
           "init": "monologg/koelectra-small-v3-discriminator", "init_generator": "monologg/koelectra-small-v3-generator"}
    card = encoder_card(run, None, tok)
    assert card.data.base_model == "monologg/koelectra-small-v3-discriminator"
    assert ("continued from `monologg/koelectra-small-v3-discriminator` (generator "
            "`monologg/koelectra-small-v3-generator`)") in card.text
    assert (f"`koelectra-kit pretrain corpus=[my_comments.txt] init=monologg/koelectra-small-v3-discriminator "
            f"init_generator=monologg/koelectra-small-v3-generator out={tmp_path / 'ko-more'}`") in card.text
    assert "1,000 tokens seen in this run" in card.text
    # a local folder is named, and is no base_model; a run folder whose discriminator was pushed is its hub id
    local = encoder_card({**run, "init": str(tiny_run), "init_generator": None}, None, tok)
    assert local.data.base_model is None and f"continued from `{tiny_run}`:" in local.text
    pushed = tmp_path / "pushed-run"
    (pushed / "discriminator").mkdir(parents=True)
    (pushed / "discriminator" / "README.md").write_text("---\nmodel_name: me/ko-encoder\n---\n# x\n",
                                                         encoding="utf-8")
    assert encoder_card({**run, "init": str(pushed)}, None, tok).data.base_model == "me/ko-encoder"


def test_push_without_network_is_one_line_after_a_complete_save(tiny_encoder_dir, sample_dir, tmp_path, capsys):
    out = tmp_path / "clf"
    rc = main(["finetune", "--config", str(TINY_FINETUNE), f"model={tiny_encoder_dir}",
               f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "epochs=1", "references=false",
               "plots=false", "progress=false", "push_to_hub=me/koelectra-test"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error: push_to_hub=me/koelectra-test") and "HF_HUB_OFFLINE" in err[-1]
    assert sum(line.startswith("error:") for line in err) == 1
    for name in ("config.json", "model.safetensors", "tokenizer.json", "README.md", "eval.json"):
        assert (out / name).is_file(), name
    rc = main(["export", "--model", str(out), "--push-to-hub", "me/koelectra-test"])
    assert rc == 2 and capsys.readouterr().err.count("\n") == 1


def test_bad_repo_id_fails_before_training(tmp_path, capsys):
    rc = main(["finetune", "model=nowhere", f"train={tmp_path / 'x.csv'}", f"out={tmp_path / 'o'}",
               "push_to_hub=not a repo"])
    assert rc == 2 and "owner/name" in capsys.readouterr().err


@pytest.mark.parametrize("override, needle", [
    ("card_license=Apache 2.0", "card_license='Apache 2.0': give the hub's license id, lowercase"),
    ("card_license=CC BY-SA 4.0", "card_license='CC BY-SA 4.0'"),
    ("card_datasets=[e9t/nsmc,my reviews.csv]", "card_datasets: 'my reviews.csv' is not a hub dataset id"),
])
@pytest.mark.parametrize("command", ["finetune", "pretrain"])
def test_card_metadata_the_hub_would_refuse_fails_before_training(command, override, needle, tmp_path, capsys):
    args = ([f"train={tmp_path / 'x.csv'}", "model=nowhere"] if command == "finetune" else
            ["--config", "tiny", f"corpus={tmp_path / 'x.txt'}"])
    assert main([command, *args, f"out={tmp_path / 'o'}", override]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_card_metadata_in_the_hubs_spelling_is_accepted():
    from koelectra_kit.hub.repo import check_card_metadata

    for license_id in ("apache-2.0", "cc-by-nc-sa-4.0", "openrail++", "llama3.1", "other"):
        check_card_metadata(license_id, ["e9t/nsmc", "nsmc", "Beomi/KcBERT-data_v1.2"])
