"""Build glue that pyproject.toml cannot express: the package-dir mapping and the optional C extension.

``commands/`` and ``inspectors/`` sit at the top of the repository but install as ``amqtool.commands`` and
``amqtool.inspectors``. The extension ``amqtool._native`` is optional: if the compiler fails, amqtool installs
with its pure-Python fallbacks (``amqtool.native`` reports which capabilities are missing). Set
``AMQTOOL_REQUIRE_NATIVE=1`` to make a failed build an error (CI and ``make`` do).
"""
import os
from glob import glob

from setuptools import Extension, find_packages, setup

PACKAGE_DIRS = {"amqtool": "amqtool", "amqtool.commands": "commands", "amqtool.inspectors": "inspectors"}


def _packages():
    packages = []
    for name, folder in PACKAGE_DIRS.items():
        packages.append(name)
        packages += [f"{name}.{sub}" for sub in find_packages(folder)]
    return packages


native = Extension(
    "amqtool._native",
    sources=sorted(glob("native/*.c")),
    depends=sorted(glob("native/*.h")),
    extra_compile_args=["-O2", "-std=gnu11", "-Wall"],
    optional=os.environ.get("AMQTOOL_REQUIRE_NATIVE") != "1",
)

setup(
    packages=_packages(),
    package_dir=PACKAGE_DIRS,
    ext_modules=[native] if glob("native/*.c") else [],
    include_package_data=True,
    # The man pages install where `man` looks under the environment's prefix (<venv>/share/man/man1).
    data_files=[("share/man/man1", sorted(glob("man/*.1")))],
)
