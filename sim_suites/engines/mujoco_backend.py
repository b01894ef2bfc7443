"""MuJoCo backend: the Panda description compiled with MjSpec, plus the scene and servos.

The corrected Panda URDF (`sim_suites.panda_description`: identified link dynamics, finger pads)
is parsed by `mujoco.MjSpec.from_string`, extended with joint armature, damping and Coulomb
friction, the scene bodies, one position actuator per joint (`set_to_position(kp, kv)`,
torque-limited to the URDF effort; the fingers force-limited to the grip force and coupled by a
joint equality, as the Franka Hand's single drive couples them) and one inactive weld per
graspable body (used only by the *assisted* grasp mode), then compiled once. Per-episode
parameters are written into the compiled model from saved nominal copies, so a reset never
recompiles.

Settings tuned for MuJoCo (`MUJOCO_CONE`, `MUJOCO_IMPRATIO`): the elliptic friction cone with impratio 10, so
friction grasps hold without creeping (measured: a 1 kg cube and friction ×0.1 hold at 20 N per
finger, 3 kg slips); implicit-fast integration at 2 ms. Self-collision is on (MuJoCo skips
parent–child pairs; `SELF_COLLISION_EXCLUDE` lists the few neighbours whose mesh hulls overlap
in normal postures). Object friction is the object's coefficient (geom priority), matching
PyBullet's product rule with unit friction on the robot.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import mujoco
import numpy as np

from embodied_eval.errors import EvalError
from sim_suites.arena import PART_ROLES, Scene
from sim_suites.engines.base import (
    PHYSICS_DT,
    TABLE,
    InitialState,
    PhysicsParams,
    quat_conj_mul,
    yaw_quat,
)
from sim_suites.engines.contact_softness import set_contact_softness
from sim_suites.engines.mobile_base import MobileDrive, MujocoMobileBase
from sim_suites.engines.mujoco_contacts import MujocoContacts
from sim_suites.engines.mujoco_scene import WORLD_CONAFFINITY, WORLD_CONTYPE, add_scene_body
from sim_suites.rendering.appearance import Appearance
from sim_suites.rendering.mujoco_render import MujocoRenderer, add_visuals
from sim_suites.robot import SerialArm
from sim_suites.robot_profiles import PANDA, RobotProfile

#: Solver settings tuned for MuJoCo (see the module docstring): friction cone, ratio of frictional
#: to normal constraint impedance, solver iterations.
MUJOCO_CONE = mujoco.mjtCone.mjCONE_ELLIPTIC
MUJOCO_IMPRATIO = 10.0
MUJOCO_ITERATIONS = 100
# Everything collides with everything (self-collision on); parent–child pairs are skipped by
# MuJoCo and the pairs of SELF_COLLISION_EXCLUDE explicitly.
_ROBOT_CONTYPE, _ROBOT_CONAFFINITY = 1, 1


_LOG = logging.getLogger(__name__)


def _log_mujoco_warning(message: str) -> None:
    _LOG.warning("MuJoCo: %s", message)


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to `logging` instead of a MUJOCO_LOG.TXT in the working directory.

    Only when nobody installed a handler before; instabilities are still caught per episode from
    the data's warning counters (`MujocoBackend.diverged`), which end the episode as an error.
    """
    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_log_mujoco_warning)


def _mujoco_body(kin: SerialArm, link: str) -> str:
    """The body a URDF link becomes: the importer fuses the hand and flange into the last link."""
    return kin.last_link if link in kin.fused_into_last else link


class MujocoBackend(MobileDrive):
    """One MuJoCo model/data pair for one scene. See `PhysicsBackend`."""

    engine = "mujoco"

    def __init__(
        self,
        scene: Scene,
        kinematics: SerialArm,
        *,
        image_size: tuple[int, int] | None = None,
        profile: RobotProfile = PANDA,
    ) -> None:
        self.scene = scene
        self.kin = kin = kinematics
        self.profile = profile
        arm_joints, finger_joints, n = kin.arm_joints, kin.finger_joints, kin.n
        layout = kin.layout
        route_mujoco_warnings()
        # A mobile profile carries the arm on its base in its own description.
        urdf = profile.urdf_text(False) if profile.mobile else layout.description(False)
        spec = mujoco.MjSpec.from_string(urdf)
        spec.option.timestep = PHYSICS_DT
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        spec.option.cone = MUJOCO_CONE
        spec.option.impratio = MUJOCO_IMPRATIO
        spec.option.iterations = MUJOCO_ITERATIONS
        for i, name in enumerate(arm_joints):
            joint = spec.joint(name)
            joint.armature = float(layout.armature[i])
            joint.frictionloss = float(layout.friction[i])
        for link_a, link_b in layout.self_collision_exclude:
            body_a, body_b = _mujoco_body(kin, link_a), _mujoco_body(kin, link_b)
            if body_a != body_b:  # the hand is part of link 7 here
                exclude = spec.add_exclude()
                exclude.bodyname1, exclude.bodyname2 = body_a, body_b
        coupling = spec.add_equality()
        coupling.name = "finger_coupling"
        coupling.type = mujoco.mjtEq.mjEQ_JOINT
        coupling.objtype = mujoco.mjtObj.mjOBJ_JOINT
        coupling.name1, coupling.name2 = finger_joints[1], finger_joints[0]
        coupling.data = [0.0, 1.0] + [0.0] * 10
        for geom in spec.geoms:
            geom.contype, geom.conaffinity = _ROBOT_CONTYPE, _ROBOT_CONAFFINITY
            geom.friction = [1.0, 0.005, 0.0001]
        floor = spec.worldbody.add_geom()
        floor.name = TABLE
        floor.type = mujoco.mjtGeom.mjGEOM_PLANE
        floor.size = [10.0, 10.0, 0.1] if profile.mobile else [2.0, 2.0, 0.1]
        floor.friction = [scene.table_friction, 0.005, 0.0001]
        floor.contype, floor.conaffinity = WORLD_CONTYPE, WORLD_CONAFFINITY
        for body in scene.bodies:
            add_scene_body(spec, body)
        for i, name in enumerate((*arm_joints, *finger_joints)):
            act = spec.add_actuator()
            act.name = f"servo_{name}"
            act.trntype = mujoco.mjtTrn.mjTRN_JOINT
            act.target = name
            if i < n:
                act.set_to_position(kp=float(kin.arm_kp[i]), kv=float(kin.arm_kv[i]))
                limit = float(kinematics.effort[i])
            else:
                act.set_to_position(kp=kin.finger_kp, kv=kin.finger_kv)
                limit = min(kin.grip_force_n, float(kinematics.finger_effort))
            act.forcelimited = True
            act.forcerange = [-limit, limit]
            act.ctrllimited = False
        self._graspable = [b.name for b in scene.bodies if b.role in (*PART_ROLES, "drawer")]
        for name in self._graspable:
            eq = spec.add_equality()
            eq.name = f"grasp_{name}"
            eq.type = mujoco.mjtEq.mjEQ_WELD
            eq.objtype = mujoco.mjtObj.mjOBJ_BODY
            eq.name1 = kin.last_link
            eq.name2 = name
            eq.active = False
            # A stiff weld (time constant 5 ms, the softest MuJoCo allows at 2 ms is 4 ms) so
            # the part does not swing in the hand; PyBullet's fixed constraint is stiff too.
            eq.solref = [0.005, 1.0]
        if image_size is not None:
            add_visuals(spec, kinematics, image_size[1], image_size[0])
        with warnings.catch_warnings():
            # The Panda's visual OBJ files carry texture coordinates MuJoCo does not use.
            warnings.filterwarnings("ignore", message="obj_decoder", category=UserWarning)
            self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self.image_size = image_size
        self._renderer: MujocoRenderer | None = None
        m = self.model
        self._arm_qadr = np.array([m.jnt_qposadr[m.joint(j).id] for j in arm_joints])
        self._arm_vadr = np.array([m.jnt_dofadr[m.joint(j).id] for j in arm_joints])
        self._fing_qadr = np.array([m.jnt_qposadr[m.joint(j).id] for j in finger_joints])
        self._fing_vadr = np.array([m.jnt_dofadr[m.joint(j).id] for j in finger_joints])
        self._q_idx = np.concatenate([self._arm_qadr, self._fing_qadr])
        self._v_idx = np.concatenate([self._arm_vadr, self._fing_vadr])
        self._link7 = m.body(kin.last_link).id
        self._body_id = {b.name: m.body(b.name).id for b in scene.bodies}
        self._eq_id = {n: m.equality(f"grasp_{n}").id for n in self._graspable}
        self._mocap_id = {
            b.name: m.body_mocapid[self._body_id[b.name]]
            for b in scene.bodies
            if m.body_mocapid[self._body_id[b.name]] >= 0
        }
        # The arm's and hand's bodies, and a mobile base's: "robot" in contact bookkeeping.
        arm_bodies = {m.body(j.child).id for j in kin.arm} | {
            m.body(link).id for link in kin.finger_links
        }
        robot_bodies = arm_bodies | {m.body(name).id for name in profile.base_links}
        self.contacts = MujocoContacts(m, scene, self._body_id, robot_bodies)
        self._floor_geom = m.geom(TABLE).id
        self.mobile: MujocoMobileBase | None = (
            MujocoMobileBase(
                m,
                self.data,
                robot_bodies | {m.body(n).id for n in ("base_x_link", "base_y_link")},
                m.body("mobile_base").id,
            )
            if profile.mobile
            else None
        )
        # Nominal copies of everything a reset rewrites.
        self._nominal = {
            "body_mass": m.body_mass.copy(),
            "body_inertia": m.body_inertia.copy(),
            "body_ipos": m.body_ipos.copy(),
            "geom_friction": m.geom_friction.copy(),
            "dof_damping": m.dof_damping.copy(),
            "dof_frictionloss": m.dof_frictionloss.copy(),
            "gainprm": m.actuator_gainprm.copy(),
            "biasprm": m.actuator_biasprm.copy(),
            "forcerange": m.actuator_forcerange.copy(),
            "geom_size": m.geom_size.copy(),
            "geom_pos": m.geom_pos.copy(),
            "geom_rbound": m.geom_rbound.copy(),
            "geom_aabb": m.geom_aabb.copy(),
            "geom_solref": m.geom_solref.copy(),
        }
        self._fingers = (m.body(kin.finger_links[0]).id, m.body(kin.finger_links[1]).id)
        self._geom_body = [int(b) for b in m.geom_bodyid]
        # The arm's bodies: what `link_mass_scale` scales.
        self._robot_body_ids = np.array(sorted(arm_bodies))
        self._object_bodies = np.array(
            [self._body_id[b.name] for b in scene.bodies if b.role == "object"], dtype=int
        )
        # Free parts that `object_size_scale` resizes, and all their geoms (the collision boxes
        # are also what the cameras draw).
        free_parts = {
            self._body_id[b.name] for b in scene.bodies if b.role == "object" and b.joint == "free"
        }
        self._part_bodies = np.array(sorted(free_parts), dtype=int)
        self._part_geoms = np.array(
            [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in free_parts], dtype=int
        )
        part_ids = {self._body_id[b.name] for b in scene.bodies if b.role in PART_ROLES}
        self._object_geoms = np.array(
            [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in part_ids], dtype=int
        )
        self._slide_dof = {
            b.name: m.jnt_dofadr[m.body_jntadr[self._body_id[b.name]]]
            for b in scene.bodies
            if b.joint == "slide"
        }
        self._contact_buf = np.zeros(6)
        self._peak: dict[tuple[str, str], float] = {}
        self._net_peak = np.zeros(3)
        # A live view of the data's warning counters (the data is allocated once) and the
        # counters that mean the simulation went unstable.
        self._warning_counts = self.data.warning.number
        self._unstable = tuple(
            int(kind)
            for kind in (
                mujoco.mjtWarning.mjWARN_BADQPOS,
                mujoco.mjtWarning.mjWARN_BADQVEL,
                mujoco.mjtWarning.mjWARN_BADQACC,
            )
        )
        self.attached: str | None = None

    # ------------------------------------------------------------------ build

    # ------------------------------------------------------------------ episode

    def reset(self, init: InitialState, params: PhysicsParams) -> None:
        m, d = self.model, self.data
        nom = self._nominal
        self._peak = {}
        self._net_peak = np.zeros(3)
        m.body_mass[:] = nom["body_mass"]
        m.body_inertia[:] = nom["body_inertia"]
        m.body_ipos[:] = nom["body_ipos"]
        m.geom_friction[:] = nom["geom_friction"]
        m.dof_damping[:] = nom["dof_damping"]
        m.dof_frictionloss[:] = nom["dof_frictionloss"]
        m.actuator_gainprm[:] = nom["gainprm"]
        m.actuator_biasprm[:] = nom["biasprm"]
        m.actuator_forcerange[:] = nom["forcerange"]
        m.geom_size[:] = nom["geom_size"]
        m.geom_pos[:] = nom["geom_pos"]
        m.geom_rbound[:] = nom["geom_rbound"]
        m.geom_aabb[:] = nom["geom_aabb"]
        m.geom_solref[:] = nom["geom_solref"]
        n = self.kin.n
        m.actuator_forcerange[n : n + 2] *= params.grip_force_scale
        rb = self._robot_body_ids
        m.body_mass[rb] *= params.link_mass_scale
        m.body_inertia[rb] *= params.link_mass_scale
        if params.payload_kg > 0.0:
            # Lump the payload at the hand's centre of mass (the same point PyBullet uses).
            b = self._link7
            m0, c0 = m.body_mass[b], m.body_ipos[b].copy()
            p = self.kin.hand_com_in_link7
            m.body_mass[b] = m0 + params.payload_kg
            m.body_ipos[b] = (m0 * c0 + params.payload_kg * p) / (m0 + params.payload_kg)
        ob = self._object_bodies
        m.body_mass[ob] *= params.object_mass_scale
        m.body_inertia[ob] *= params.object_mass_scale
        self._resize_parts(params.object_size_scale)
        m.geom_friction[self._object_geoms, 0] *= params.friction_scale
        for dof in self._slide_dof.values():
            m.dof_frictionloss[dof] *= params.friction_scale
        m.dof_damping[self._arm_vadr] = self.kin.damping * params.joint_damping_scale
        g = params.actuator_gain_scale
        m.actuator_gainprm[:, 0] *= g
        m.actuator_biasprm[:, 1] *= g
        m.actuator_biasprm[:, 2] *= g
        set_contact_softness(self, params.contact_timeconst_s)
        m.geom_friction[self._floor_geom, 0] *= params.floor_friction_scale
        if self.mobile is not None:
            self.mobile.scale_mass(m, params)
        # Masses and inertias changed: recompute the compiler's derived constants (inverse
        # weights used by the constraint solver, subtree masses).
        mujoco.mj_setConst(m, d)
        mujoco.mj_resetData(m, d)
        d.eq_active[:] = 0
        self.attached = None
        d.qpos[self._arm_qadr] = init.arm_q
        d.qpos[self._fing_qadr] = init.finger_q
        d.ctrl[:n] = init.arm_q
        d.ctrl[n : n + 2] = init.finger_q
        for body in self.scene.bodies:
            bid = self._body_id[body.name]
            pos = np.asarray(init.body_pos.get(body.name, body.pos), dtype=float)
            if body.joint == "free":
                adr = m.jnt_qposadr[m.body_jntadr[bid]]
                d.qpos[adr : adr + 3] = pos
                d.qpos[adr + 3 : adr + 7] = yaw_quat(init.body_yaw.get(body.name, 0.0))
            elif body.name in self._mocap_id:
                d.mocap_pos[self._mocap_id[body.name]] = pos
            elif body.joint == "slide":
                # The slide's frame is the body's model position: placement moves it there
                # (as PyBullet moves the drawer's base).
                m.body_pos[bid] = pos
                adr = m.jnt_qposadr[m.body_jntadr[bid]]
                d.qpos[adr] = init.slide_q.get(body.name, 0.0)
        if self.mobile is not None:
            self.mobile.reset(m, d, init, params)
        mujoco.mj_forward(m, d)

    def _resize_parts(self, s: float) -> None:
        """Scale the free parts' geoms by `s` in the compiled model (see `PhysicsParams`).

        Geom sizes, offsets, bounding spheres (`geom_rbound`, used by the broad phase) and
        boxes (`geom_aabb`: centre and half-sizes in the geom frame) all scale by s; the part's
        mass is kept and its inertia follows the geometry (× s²), its centre of mass moves with
        the geoms. `reset` restores the nominal values first, so scales never compound.
        """
        if s == 1.0:
            return
        m = self.model
        g, b = self._part_geoms, self._part_bodies
        m.geom_size[g] *= s
        m.geom_pos[g] *= s
        m.geom_rbound[g] *= s
        m.geom_aabb[g] *= s
        m.body_inertia[b] *= s * s
        m.body_ipos[b] *= s

    def step(self, arm_cmd: np.ndarray, finger_cmd: float, substeps: int) -> None:
        m, d = self.model, self.data
        n = self.kin.n
        d.ctrl[:n] = arm_cmd
        d.ctrl[n] = d.ctrl[n + 1] = finger_cmd
        # Contact forces are read after every physics step: a peak between control steps
        # (a hand hitting a wall) must reach the monitors (`contact_forces`).
        peak: dict[tuple[str, str], float] = {}
        net_peak = np.zeros(3)
        mobile = self.mobile
        for _ in range(substeps):
            if mobile is not None:
                mobile.apply(d)
            mujoco.mj_step(m, d)
            if d.ncon:
                pairs, net = self.contacts.forces(m, d)
                for key, force in pairs.items():
                    if force > peak.get(key, 0.0):
                        peak[key] = force
                if net @ net > net_peak @ net_peak:
                    net_peak = net
        self._peak = peak
        self._net_peak = net_peak

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.data.qpos[self._q_idx].copy(), self.data.qvel[self._v_idx].copy()

    def applied_torque(self) -> np.ndarray:
        return self.data.actuator_force[: self.kin.n + 2].copy()

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        bid = self._body_id[name]
        return self.data.xpos[bid].copy(), self.data.xquat[bid].copy()

    def body_velocity(self, name: str) -> np.ndarray:
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(
            self.model, self.data, mujoco.mjtObj.mjOBJ_BODY, self._body_id[name], vel, 0
        )
        return vel[3:].copy()

    def slide_q(self, name: str) -> float:
        bid = self._body_id[name]
        return float(self.data.qpos[self.model.jnt_qposadr[self.model.body_jntadr[bid]]])

    def finger_contact_forces(self, name: str) -> tuple[float, float]:
        m, d = self.model, self.data
        ncon = d.ncon
        forces = [0.0, 0.0]
        if ncon == 0:
            return 0.0, 0.0
        target = self._body_id[name]
        left, right = self._fingers
        body = self._geom_body
        buf = self._contact_buf
        for i, (g1, g2) in enumerate(d.contact.geom[:ncon].tolist()):
            b1, b2 = body[g1], body[g2]
            other = b2 if b1 == target else b1 if b2 == target else -1
            if other in (left, right):
                mujoco.mj_contactForce(m, d, i, buf)
                forces[0 if other == left else 1] += abs(float(buf[0]))
        return forces[0], forces[1]

    def attach(self, name: str) -> None:
        m, d = self.model, self.data
        self.detach()
        eq = self._eq_id[name]
        bid = self._body_id[name]
        p1, q1 = d.xpos[self._link7], d.xquat[self._link7]
        p2, q2 = d.xpos[bid], d.xquat[bid]
        rot1 = d.xmat[self._link7].reshape(3, 3)
        # Weld data: anchor (3), pose of body 2 in body 1 (3 + 4), torque scale.
        m.eq_data[eq, 0:3] = 0.0
        m.eq_data[eq, 3:6] = rot1.T @ (p2 - p1)
        m.eq_data[eq, 6:10] = quat_conj_mul(q1, q2)
        m.eq_data[eq, 10] = 1.0
        d.eq_active[eq] = 1
        self.attached = name

    def detach(self) -> None:
        if self.attached is not None:
            self.data.eq_active[self._eq_id[self.attached]] = 0
            self.attached = None

    def move_body(self, name: str, pos: np.ndarray) -> None:
        self.data.mocap_pos[self._mocap_id[name]] = pos

    def contact_forces(self) -> dict[tuple[str, str], float]:
        """Peak over the last control step's physics steps (see `PhysicsBackend`)."""
        return dict(self._peak)

    def robot_external_force(self) -> np.ndarray:
        """Peak (by magnitude) over the last control step's physics steps of the net external
        force on the robot (3,) N (see `PhysicsBackend`)."""
        return self._net_peak.copy()

    def separation(self, bodies: Sequence[str], max_m: float) -> dict[str, float]:
        """Distance from the robot's geometry to each body (see `MujocoContacts.separation`)."""
        return self.contacts.separation(self.model, self.data, bodies, max_m)

    def nearest(self, bodies: Sequence[str], max_m: float) -> float:
        """Distance from the robot's geometry to the nearest body (`MujocoContacts.nearest`)."""
        return self.contacts.nearest(self.model, self.data, bodies, max_m)

    def diverged(self) -> bool:
        counts = self._warning_counts.tolist()
        return any(counts[kind] > 0 for kind in self._unstable)

    def renderer(self) -> MujocoRenderer:
        """The offscreen renderer (its GL context opens on first use)."""
        if self.image_size is None:
            raise EvalError("rendering: this backend was built without cameras", key="rendering")
        if self._renderer is None:
            self._renderer = MujocoRenderer(self.model, self.data, self.image_size)
        return self._renderer

    def set_appearance(self, appearance: Appearance) -> None:
        """Light intensities and body colours of the episode (cameras only)."""
        self.renderer().apply(appearance)

    def render(self, camera: str, depth: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """RGB and optional depth image of one camera (see `MujocoRenderer.render`)."""
        return self.renderer().render(camera, depth)

    def close(self) -> None:
        self.detach()
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
