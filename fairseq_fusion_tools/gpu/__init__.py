"""The GPU runs: ``fusion-gpu-check`` (``check``: every arch in fp32, fp16 and bf16 in one process, ``check_train``;
DDP, ``check_ddp``; the base-size benchmark, ``check_benchmark``; ``check_report``) and ``fusion-gpu-speed``
(``speed``: the profile, the host overhead, compile and the benchmark at the hardware's pace; ``speed_measure``,
``speed_report``).
"""
