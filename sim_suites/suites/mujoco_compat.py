"""Compatibility of a suite written for MuJoCo 3.3 with the MuJoCo this project runs on (4.0).

One change breaks Meta-World 3.1.1: an equality constraint's data row (`model.eq_data[i]`) grew
from 11 numbers to 12 (`mujoco.mjNEQDATA`, from MuJoCo 3.17 on). Meta-World resets its mocap weld
by writing 11 numbers into the row, which fails with a broadcast error on a 12-wide row.
`write_eq_data` writes a row given in the 3.3 layout into a model of any width: the given numbers
into the first columns and zero into the ones MuJoCo added. `patch_metaworld` puts a version of
Meta-World's `reset_mocap_welds` built on it in place; it does nothing on a MuJoCo whose rows are
still 11 wide.

MuJoCo 4.0 also compares its enums with numpy integers differently (`enum == np.int32(3)` is
False), so the weld test compares plain ints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Width of an equality constraint's data row in the MuJoCo 3.3 layout Meta-World writes.
LEGACY_EQ_WIDTH = 11

#: The weld row Meta-World writes at reset, in the 3.3 layout: anchor (3), relative position (3),
#: relative orientation as a quaternion (4), torque scale (1).
METAWORLD_WELD_ROW = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0)


def write_eq_data(eq_data: np.ndarray, row: int, values: Any) -> None:
    """Write a data row given in an older, narrower layout into `eq_data[row]`.

    Args:
        eq_data: the model's (neq, width) equality data; width ≥ len(values).
        row: the constraint's index.
        values: the row's numbers in the older layout (11 for MuJoCo ≤ 3.16).

    The first len(values) columns take the values; the columns a newer MuJoCo added are zeroed.
    """
    given = np.asarray(values, dtype=np.float64).ravel()
    width = eq_data.shape[1]
    if given.size > width:
        raise ValueError(f"{given.size} values do not fit an equality data row of width {width}")
    eq_data[row, : given.size] = given
    eq_data[row, given.size :] = 0.0


def reset_mocap_welds(env: Any) -> None:
    """Meta-World's `SawyerMocapBase.reset_mocap_welds`, for any equality data width.

    Every weld constraint's row becomes `METAWORLD_WELD_ROW` (zero-padded), as Meta-World does on
    MuJoCo 3.3.
    """
    import mujoco

    model = env.model
    if model.nmocap <= 0 or model.eq_data is None:
        return
    weld = int(mujoco.mjtEq.mjEQ_WELD)
    for i in range(model.eq_data.shape[0]):
        if int(model.eq_type[i]) == weld:
            write_eq_data(model.eq_data, i, METAWORLD_WELD_ROW)


def needs_patch() -> bool:
    """True when this MuJoCo's equality data rows are wider than Meta-World's 11 numbers."""
    import mujoco

    return int(getattr(mujoco, "mjNEQDATA", LEGACY_EQ_WIDTH)) != LEGACY_EQ_WIDTH


def patch_metaworld() -> bool:
    """Put `reset_mocap_welds` in place of Meta-World's own when this MuJoCo needs it.

    Idempotent. Returns True when the patch is in place after the call.
    """
    from metaworld.sawyer_xyz_env import SawyerMocapBase

    if not needs_patch():
        return False
    if SawyerMocapBase.reset_mocap_welds is not reset_mocap_welds:
        SawyerMocapBase.reset_mocap_welds = reset_mocap_welds  # type: ignore[method-assign,assignment]
    return True
