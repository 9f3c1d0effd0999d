from setuptools import find_packages, setup

setup(
    name="fairseq_fusion",
    version="0.1.0",
    description="Five Transformer NMT papers as options of one fairseq model (fairseq --user-dir plugin)",
    packages=find_packages(include=["fairseq_fusion", "fairseq_fusion.*"]),
    python_requires=">=3.8",
    # torch and fairseq are installed by `make install` (see README: which fairseq, and why)
    install_requires=[],
    entry_points={
        "console_scripts": [
            "fusion-average-checkpoints = fairseq_fusion.cli.average_checkpoints:cli_main",
        ]
    },
)
