"""Packaging for the Beam-native crawler: the ``pipeline`` and ``transforms`` packages and the
``crawler`` console script. Exact versions live in requirements.txt."""

from setuptools import find_packages, setup

setup(
    name="beam-crawler",
    version="0.1.0",
    description="A streaming Apache Beam web crawler: polite, deduplicating, observable.",
    python_requires=">=3.11",
    packages=find_packages(include=["pipeline", "pipeline.*", "transforms", "transforms.*"]),
    install_requires=[
        "apache-beam[gcp]>=2.77,<2.78",
        "aiohttp>=3.9",
        "selectolax>=1.0",
        "protego>=0.3",
        "warcio>=1.7",
        "google-cloud-bigtable>=2.20",
        "google-cloud-storage>=2.10",
        "google-cloud-pubsub>=2.18",
        "datasketch>=2.0",  # MinHash(scheme=...)
        "publicsuffixlist>=1.0",  # --scope domain: registered domains
        "mmh3>=4",  # MinHash word hashes (a Beam dependency too)
        "numpy>=1.24",  # MinHash signatures, vectorized
        "pyarrow>=14,<26",  # Parquet exports; Beam 2.77 requires <26
        "aioftp>=0.22",
        "pyyaml>=6",
    ],
    # What only the local tooling (pipeline/local, pipeline/demo) imports or runs.
    extras_require={"local": ["gcp-storage-emulator>=2024.0", "grpcio>=1.60", "multidict>=6"],
                    "test": ["pytest", "pytest-timeout"]},
    entry_points={"console_scripts": ["crawler=pipeline.cli.main:main"]},
)
