"""torchrun's worker for tests/test_pretrain.py: the CLI, with destroy_process_group wrapped to say how many DDP
modules are still alive when it runs. One alive then is a hang waiting to happen: its reducer becomes the process
group's last owner, and freeing it later runs gloo's destructor with the GIL held, joining a worker thread that needs
the GIL (3 runs in 30 hung so under load)."""
import gc
import sys

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

real_destroy = dist.destroy_process_group


def destroy(*args, **kwargs):
    alive = sum(isinstance(o, DistributedDataParallel) for o in gc.get_objects())
    print(f"probe: {alive} DDP module(s) alive at destroy_process_group", file=sys.stderr, flush=True)
    return real_destroy(*args, **kwargs)


dist.destroy_process_group = destroy

if __name__ == "__main__":
    from koelectra_kit.cli import main

    sys.exit(main(sys.argv[1:]))
