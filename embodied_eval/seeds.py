"""Where every seed of a run comes from: one module, used by the seed escrow, the sim and the
real side alike.

- `derive_seed`: a pair's seed from the protocol's base seed and what it is for (SHA-256; the
  rule is written into every manifest as `SEED_RULE`, so a reader can check the seeds).
- `episode_seeds`: an episode's seed split into its three independent streams — `scene` (what a
  technician or a reset station sets up on the real table, shared by both halves of a pair),
  `physics` (the sim-only draws: domain randomization, sensor noise, fault timing, camera looks;
  a real robot has its own physics and never takes these) and `policy` (the seed both halves'
  policies are reset with). The streams are children of `SeedSequence(seed)` (`physics` =
  child 0, `policy` = child 1, `scene` = child 2), so adding the scene stream did not change the
  physics or policy seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embodied_eval.canonical import sha256_hex

#: How `derive_seed` works, written into every manifest so a reader can check the seeds.
SEED_RULE = "seed = int(SHA-256('<base_seed>:<key>')[:4 bytes], big-endian); key = '<task_id>:s<k>'"


def derive_seed(base_seed: int, key: str) -> int:
    """A 32-bit seed derived from the protocol's base seed and a key, by SHA-256.

    Args:
        base_seed: the protocol's `base_seed`.
        key: what the seed is for, e.g. "pick_place/cube_center:s0" or "run-order".

    Returns:
        An int in [0, 2**32): the first four bytes of SHA-256("<base_seed>:<key>"), big-endian.
        32 bits keeps the seed usable by every simulator and RNG API.
    """
    digest = bytes.fromhex(sha256_hex(f"{base_seed}:{key}"))
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True)
class EpisodeSeeds:
    """The three independent seeds of one manifest seed (see the module docstring)."""

    physics: int
    policy: int
    scene: int


def episode_seeds(seed: int) -> EpisodeSeeds:
    """Split an episode's manifest seed into its physics, policy and scene seeds.

    Args:
        seed: the manifest row's seed (shared by the sim and real episodes of a pair).
    Returns:
        32-bit seeds from the children 0, 1, 2 of `numpy.random.SeedSequence(seed)`.
    """
    children = np.random.SeedSequence(int(seed) % 2**63).spawn(3)
    physics, policy, scene = (int(c.generate_state(1, np.uint32)[0]) for c in children)
    return EpisodeSeeds(physics=physics, policy=policy, scene=scene)
