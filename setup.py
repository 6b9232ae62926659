"""Build hook for evret-core's optional compiled accelerator; everything else lives in pyproject.toml.

``optional=True``: where no C compiler or Python headers exist the build skips the extension and evret-core
installs as pure Python (the metrics engine and the TREC file readers then use their numpy paths).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "evret_core.metrics._fastrank",
            ["evret_core/metrics/_fastrank.c"],
            optional=True,
        ),
        Extension(
            "evret_core.io._trecscan",
            ["evret_core/io/_trecscan.c"],
            optional=True,
        ),
    ]
)
