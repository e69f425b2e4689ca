# Spack package for Harmonia (docs/deploy.md): `spack repo add packaging/spack`, then
# `spack install harmonia@main` (it builds this checkout).
import os

from spack.package import *


class Harmonia(CMakePackage):
    """Interference-aware burst-buffer I/O scheduling for HPC sites: harmonia-schedd,
    harmonia-bbd buffer nodes, the libharmonia staging library, the Slurm integration and the
    simulators."""

    # The checkout this file is in (packaging/spack/packages/harmonia/package.py).
    git = "file://" + os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 4))

    version("main", branch="main")

    depends_on("cmake@3.25:", type="build")
    depends_on("ninja", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("cli11", type="build")
    depends_on("nlohmann-json", type="build")
    depends_on("tomlplusplus")
    depends_on("cpp-httplib")
    depends_on("protobuf")
    depends_on("protobuf-c")
    depends_on("munge")
    depends_on("xxhash")
    depends_on("mpi")
    depends_on("simgrid@3.32:")
    depends_on("ns-3-dev")

    generator("ninja")

    def cmake_args(self):
        return [
            self.define("HARMONIA_BUILD_TESTS", False),
            self.define("HARMONIA_BUILD_BENCHMARKS", False),
        ]
