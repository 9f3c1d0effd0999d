"""Narrow patch: fairseq's ``--ddp-backend pytorch_ddp`` on CPU (gloo).

fairseq wraps the model as ``DistributedDataParallel(module, device_ids=[device_id], ...)``;
PyTorch requires ``device_ids=None`` (and ``output_device=None``) for a module on CPU.
We substitute a subclass that drops them exactly then; on GPU nothing changes.
``legacy_ddp`` needs no patch.
"""
from torch.nn.parallel import DistributedDataParallel


class CPUAwareDistributedDataParallel(DistributedDataParallel):
    def __init__(self, module, device_ids=None, output_device=None, **kwargs):
        if all(p.device.type == "cpu" for p in module.parameters()):
            device_ids = output_device = None
        super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)


def patch_fairseq_ddp():
    from fairseq.models import distributed_fairseq_model

    if distributed_fairseq_model.DistributedDataParallel is DistributedDataParallel:
        distributed_fairseq_model.DistributedDataParallel = CPUAwareDistributedDataParallel
