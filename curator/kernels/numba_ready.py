"""Importing this module readies numba's CPU target: numba itself, its typing and lowering
registries and the modules they pull in (SciPy's BLAS check among them), about 1 s of CPU.

A process that has done this once passes it on to the processes it forks: the local cluster's
fork server imports it for pipelines with numba kernels, so no worker pays it again."""

from __future__ import annotations

from numba.core.registry import cpu_target

cpu_target.target_context.refresh()
