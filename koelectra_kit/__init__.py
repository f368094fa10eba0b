"""koelectra-kit: Korean ELECTRA toolkit (tokenizer, pretraining, fine-tuning, batch labelling)."""
__version__ = "0.1.0"
