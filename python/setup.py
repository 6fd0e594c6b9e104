"""Builds libdml's Python package: the C extension libdml._libdml, linked
statically against the libdml of this source tree.

The static library comes from LIBDML_BUILD_DIR (a CMake build directory of
this tree, e.g. `build/`, as `make test` passes) or, when that is unset, from
a CMake build made here (python/build/libdml; extra CMake options in
LIBDML_CMAKE_FLAGS). Static linking keeps the installed package
self-contained: no libdml.so to find at run time. Its private link flags
(OpenMP, and the CUDA runtime when libdml was built with CUDA) are read from
the build's dml.pc.
"""
import os
import re
import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def libdml_version():
    """DML_VERSION_* of include/dml/dml.h, where the version is set."""
    with open(os.path.join(ROOT, "include", "dml", "dml.h")) as header:
        text = header.read()
    return ".".join(re.search(rf"#define DML_VERSION_{part} ([0-9]+)", text).group(1)
                    for part in ("MAJOR", "MINOR", "PATCH"))


def libdml_build_dir():
    """The CMake build directory holding libdml.a, building it if needed."""
    build_dir = os.environ.get("LIBDML_BUILD_DIR")
    if build_dir:
        return os.path.abspath(build_dir)
    build_dir = os.path.join(HERE, "build", "libdml")
    configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DDML_BUILD_TESTS=OFF",
                 "-DDML_BUILD_TOOLS=OFF", "-DDML_BUILD_BENCH=OFF"]
    subprocess.check_call(configure + shlex.split(os.environ.get("LIBDML_CMAKE_FLAGS", "")))
    subprocess.check_call(["cmake", "--build", build_dir, "--target", "dml_static", "-j",
                           os.environ.get("LIBDML_JOBS", str(os.cpu_count() or 1))])
    return build_dir


def private_link_flags(build_dir):
    """Libs.private of the build's dml.pc: what a static libdml links with."""
    with open(os.path.join(build_dir, "dml.pc")) as pc_file:
        for line in pc_file:
            if line.startswith("Libs.private:"):
                return shlex.split(line.split(":", 1)[1])
    return []


class BuildWithLibdml(build_ext):
    def build_extension(self, ext):
        build_dir = libdml_build_dir()
        static_library = os.path.join(build_dir, "libdml.a")
        if not os.path.exists(static_library):
            raise RuntimeError(f"libdml: {static_library} is missing; build libdml first (make build)")
        ext.extra_objects = [static_library]
        # With the CUDA backend these include the static CUDA runtime and the
        # C++ runtime its objects need: the extension loads no CUDA library.
        ext.extra_link_args = private_link_flags(build_dir)
        # Always relink: setuptools would skip an extension newer than its
        # sources even when libdml.a (or LIBDML_BUILD_DIR) changed.
        self.force = True
        super().build_extension(ext)


setup(
    name="libdml",
    version=libdml_version(),
    description="DirectML's max pooling, ROI pooling, ROI align and batch normalization operators "
                "on NumPy arrays and PyTorch tensors (libdml)",
    packages=["libdml"],
    ext_modules=[Extension(
        "libdml._libdml",
        sources=[os.path.join("src", name) for name in ("module.c", "operators.c", "tensor_view.c")],
        include_dirs=[os.path.join(ROOT, "include")],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wshadow"],
    )],
    cmdclass={"build_ext": BuildWithLibdml},
    python_requires=">=3.9",
)
