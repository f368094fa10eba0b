"""koelectra-kit: Korean ELECTRA toolkit (tokenizer, pretraining, fine-tuning, batch labelling)."""
__version__ = "0.1.0"

from .hf_hook import register_with_transformers as _register_with_transformers

# AutoTokenizer / pipeline("text-classification") load this toolkit's folders with its tokenizer class
# (koelectra_kit.tokenizer.hf), registered now or as soon as transformers loads its tokenizer mapping.
_register_with_transformers()
