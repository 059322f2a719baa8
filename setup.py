"""The one thing ``pyproject.toml`` cannot say stably: the optional C extension.

``core/_speedups.c`` holds C versions of the hot loops of ``core.jsoncodec`` and of
validating and building appended events. It is
optional: where it cannot be compiled, dsh installs anyway and runs the pure-Python
versions, which the tests check it against.
"""

from setuptools import Extension, setup

# One translation unit: core/_speedups.c includes its parts (one concern each); they are
# listed so that a change to one rebuilds the module.
PARTS = ["text", "frozen", "json_read", "packs", "encode", "unlink", "appends", "search"]

setup(
    ext_modules=[
        Extension(
            "core._speedups",
            ["core/_speedups.c"],
            depends=[f"core/speedups/{part}.c" for part in PARTS],
            optional=True,
        )
    ]
)
