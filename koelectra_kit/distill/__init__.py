"""Distil one or more teachers (fine-tuned classifiers and/or the TF-IDF baseline) into a student classifier
through soft labels on unlabelled in-domain text (Hinton et al. 2015).

    koelectra-kit distill teachers=[runs/sentiment,tfidf] transfer=reviews.txt exclude=[dev.tsv] \\
        student=runs/small/discriminator train=train.tsv dev=dev.tsv out=runs/student

One module a concern, in the order a run uses them:
  config.py      ``DistillConfig``: teachers, transfer set, student, the loss's T and alpha, the budget
  data.py        the transfer texts: read, repeats and ``exclude``/dev texts dropped (normalized exact match)
  teacher.py     each teacher's probabilities (cached in Arrow shards), the ensemble weights chosen on dev
  checkpoint.py  the loop's progress and its checkpoints in OUT.work/ (a killed run continues)
  recipe.py      ``distill(cfg)``: setup steps, the loss, one flat loop, the student folder (as ``finetune``
                 writes one: ``label``, ``evaluate`` and ``Classifier.load`` take it unchanged)
"""
from .config import DistillConfig
from .recipe import DistillRecipe, distill, distill_loss

__all__ = ["DistillConfig", "DistillRecipe", "distill", "distill_loss"]
