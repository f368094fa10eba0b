"""The ELECTRA model for pretraining, built from transformers' own classes:

- ``model``: the generator and discriminator as one module, dynamic masking, sampling, the train step;
- ``cpu``: cheaper CPU dropout and attention kernels (a speed detail; the numbers are the same);
- ``prior``: the positional prior the encoders can start from (``model.init: positional``).

``from koelectra_kit.electra import build_pretrain_model`` (the old module's names) keeps working.
"""
from .model import (SUMMED, ElectraPretrainModel, MaskedBatch, build_optimizer, build_pretrain_model, electra_config,
                    generator_shape, mask_batch, num_mask_slots, replaced_auc, sample_softmax, train_step)

__all__ = ["SUMMED", "ElectraPretrainModel", "MaskedBatch", "build_optimizer", "build_pretrain_model", "electra_config",
           "generator_shape", "mask_batch", "num_mask_slots", "replaced_auc", "sample_softmax", "train_step"]
