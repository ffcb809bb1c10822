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


def _completions():
    """The bash, zsh and fish completion scripts, generated now from the command tree
    (commands/completion.py) into build/completions, installed where the shells look. Needs typer at build
    time (pyproject.toml build-system requires); without it, no scripts (said on stderr)."""
    import importlib.util
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        sys.path.insert(0, here)
        import amqtool  # noqa: F401  (the package being built)

        for name, folder in PACKAGE_DIRS.items():  # commands/ installs as amqtool.commands: map it for import
            if name != "amqtool" and name not in sys.modules:
                spec = importlib.util.spec_from_file_location(name, os.path.join(here, folder, "__init__.py"),
                                                              submodule_search_locations=[os.path.join(here, folder)])
                sys.modules[name] = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(sys.modules[name])
        from amqtool.commands.completion import INSTALL_PATHS, write_all

        written = write_all(os.path.join("build", "completions"))
    except ImportError as err:
        sys.stderr.write(f"amqtool: shell completion scripts not generated ({err})\n")
        return []
    finally:
        sys.path.remove(here)
    return [(INSTALL_PATHS[shell][0], [os.path.relpath(path, here)]) for shell, path in written.items()]


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
    data_files=[("share/man/man1", sorted(glob("man/*.1")))] + _completions(),
)
