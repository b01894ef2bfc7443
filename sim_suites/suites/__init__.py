"""Standard benchmark suites run through their own packages as the sim side of a protocol.

A suite is a sim engine (`[sim] engines = ["metaworld"]`) whose instances are the suite's tasks
(`metaworld/pick-place-v3`). The suite's own package builds, resets and scores each episode; the
harness drives its resets with the episode's seeds, applies the protocol's randomization through
the suite's MuJoCo model where a knob maps onto it, and records the suite, its package version and
its task with every episode. Suites have no real counterpart: a protocol using one runs sim-only.

- `meta_world`: Meta-World (the `metaworld` package, v3 tasks, its bundled expert policies).
- `mujoco_compat`: the small shim that lets the suite's MuJoCo 3.3 code run on MuJoCo 4.0.
"""
