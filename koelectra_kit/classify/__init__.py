"""The classifier kinds and what serves them. ``Classifier.load`` takes any of the three kinds of folder: a
fine-tuned encoder (transformers ``config.json``), a TF-IDF folder or an ensemble (the toolkit's own
``classifier.json``), the last two found through ``registry``.

- ``classifier``: ``Classifier`` (a fine-tuned encoder or hub id + its tokenizer), the one scoring path
  (``collate``, ``predict_logits``), and ``model_digest``;
- ``registry``: ``classifier.json``, the kinds it names and where each kind's loader lives;
- ``tfidf``: TF-IDF character n-grams + logistic regression as a folder (and the TF-IDF fit's config);
- ``ensemble``: several classifiers' probabilities averaged with weights chosen on a dev set;
- ``onnx_backend``: the exported graph run in onnxruntime (fp32 or int8);
- ``predictions``: what every kind takes (one check of its arguments) and returns;
- ``metrics``, ``references``: macro-F1 and its report; the majority-class and TF-IDF reference rows;
- ``evaluate``: a classifier scored on a labelled table; ``modelcard``: the README.md of an exported folder.
"""
