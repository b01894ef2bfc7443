"""PyBullet backend: the same Panda description, scene and servo law, in a private DIRECT client.

Each backend connects its own client (`BulletClient` in DIRECT mode) and never touches PyBullet's
global default client, so several environments can live in one process. The robot is the
corrected Panda URDF of `sim_suites.panda_description` (identified link dynamics, finger pads;
`URDF_USE_INERTIA_FROM_FILE`), with self-collision on. The arm is torque controlled: the default
velocity motors are re-purposed as Coulomb joint friction (a zero-velocity motor whose force cap is
the friction), and the PD law of `sim_suites.engines.base.pd_torque` runs every 2 ms physics step
with the same gains and limits as MuJoCo's position actuators; the fingers are force-limited to
the grip force and coupled (each finger's servo acts on the mean opening, plus a stiff term
keeping the two equal). PyBullet's default link damping is removed.

Engine differences: PyBullet has no joint armature (rotor inertia), so its
copy of the description folds the armature into the link inertias (see
`sim_suites.panda_description`); friction uses PyBullet's pyramid approximation of the cone.

The initial world is saved once (`saveState`) and restored on every reset, which also restores
the contact solver's warm-start cache: episodes are deterministic within one client.

PyBullet cannot resize a collision shape in place, so `object_size_scale` swaps bodies: a reset
with s ≠ 1 builds the resized part as a new body (collision and visual shapes) and parks the
nominal one far away, out of every collision; the next reset removes the resized body before
restoring the saved world (whose body count it must match) and brings the nominal one back.
"""

from __future__ import annotations

import atexit
import weakref
from collections.abc import Sequence

import numpy as np

from sim_suites.engines.quiet import native_output_silenced

with native_output_silenced():  # PyBullet prints its build banner on import
    import pybullet
    from pybullet_utils import bullet_client

from embodied_eval.errors import EvalError
from sim_suites.arena import PART_ROLES, Scene
from sim_suites.engines import pybullet_scene as scene_parts
from sim_suites.engines.base import (
    PHYSICS_DT,
    ROBOT,
    TABLE,
    WELD_MAX_FORCE_N,
    InitialState,
    PhysicsParams,
    pd_torque,
    quat_conj_mul,
    quat_to_matrix,
    yaw_quat,
)
from sim_suites.engines.contact_softness import set_contact_softness
from sim_suites.engines.mobile_base import MobileDrive, PybulletMobileBase, arm_links
from sim_suites.engines.pybullet_contacts import contacts_now, nearest, separations
from sim_suites.panda_description import urdf_file
from sim_suites.rendering.appearance import Appearance
from sim_suites.rendering.pybullet_render import PybulletRenderer, table_visual
from sim_suites.robot import SerialArm
from sim_suites.robot_profiles import PANDA, RobotProfile

#: Constraint-solver iterations per step (PyBullet's default; enough for the grasps here).
PYBULLET_SOLVER_ITERATIONS = 50


_LIVE_BACKENDS: weakref.WeakSet[PybulletBackend] = weakref.WeakSet()


@atexit.register
def _close_live_backends() -> None:
    """Disconnect clients still open at exit, while `pybullet` is still importable.

    Without this, `BulletClient.__del__` runs during interpreter teardown and prints a spurious
    "Exception ignored" traceback for every env a process cached.
    """
    for backend in list(_LIVE_BACKENDS):
        backend.close()


class PybulletBackend(MobileDrive):
    """One PyBullet DIRECT client for one scene. See `PhysicsBackend`."""

    engine = "pybullet"

    def __init__(
        self,
        scene: Scene,
        kinematics: SerialArm,
        *,
        image_size: tuple[int, int] | None = None,
        profile: RobotProfile = PANDA,
    ) -> None:
        self.scene = scene
        self.profile = profile
        self.image_size = image_size
        self._renderer: PybulletRenderer | None = None
        self.kin = kin = kinematics
        n, layout = kin.n, kin.layout
        with native_output_silenced():  # connecting prints "argv[0]=" to fd 1
            client = bullet_client.BulletClient(connection_mode=pybullet.DIRECT)
        self.client = client
        _LIVE_BACKENDS.add(self)
        client.setGravity(0.0, 0.0, -9.81)
        client.setPhysicsEngineParameter(
            fixedTimeStep=PHYSICS_DT,
            numSubSteps=1,
            deterministicOverlappingPairs=1,
            numSolverIterations=PYBULLET_SOLVER_ITERATIONS,
        )
        # A mobile profile carries the arm on its base in its own description.
        urdf = (
            urdf_file(profile.urdf_text(True)) if profile.mobile else layout.description_file(True)
        )
        self.robot = client.loadURDF(
            str(urdf),
            useFixedBase=True,
            flags=pybullet.URDF_USE_INERTIA_FROM_FILE
            | pybullet.URDF_USE_SELF_COLLISION
            | pybullet.URDF_USE_SELF_COLLISION_EXCLUDE_PARENT,
        )
        joint_index = {}
        link_index = {}
        for j in range(client.getNumJoints(self.robot)):
            info = client.getJointInfo(self.robot, j)
            joint_index[info[1].decode()] = j
            link_index[info[12].decode()] = j
        self._joints = [joint_index[j] for j in (*kin.arm_joints, *kin.finger_joints)]
        self._hand = link_index[kin.hand_link]
        self._fingers = (link_index[kin.finger_links[0]], link_index[kin.finger_links[1]])
        self._robot_links = list(range(-1, client.getNumJoints(self.robot)))
        names = {j: n for n, j in link_index.items()}
        self._arm_links = arm_links(names) if profile.mobile else self._robot_links
        self.mobile: PybulletMobileBase | None = (
            PybulletMobileBase(client, self.robot, joint_index) if profile.mobile else None
        )
        client.changeDynamics(self.robot, -1, linearDamping=0.0, angularDamping=0.0)
        for link in self._robot_links:
            # A separate call: combined with the damping arguments, PyBullet leaves the links'
            # friction at its 0.5 default.
            client.changeDynamics(self.robot, link, lateralFriction=1.0)
        for a, b in layout.self_collision_exclude:
            client.setCollisionFilterPair(
                self.robot, self.robot, link_index[a], link_index[b], enableCollision=0
            )
        # The default velocity motors become Coulomb friction (zero target velocity, force cap =
        # friction); torques come from our PD law.
        client.setJointMotorControlArray(
            self.robot,
            self._joints,
            pybullet.VELOCITY_CONTROL,
            targetVelocities=[0.0] * (n + 2),
            forces=[*map(float, layout.friction), 0.0, 0.0],
        )
        plane = client.createCollisionShape(pybullet.GEOM_PLANE)
        self.table = client.createMultiBody(
            0.0, plane, table_visual(client) if image_size is not None else -1
        )
        client.changeDynamics(
            self.table, -1, lateralFriction=scene.table_friction, linearDamping=0.0
        )
        self._ids: dict[str, int] = {}
        for body in scene.bodies:
            self._ids[body.name] = scene_parts.add_body(client, body, image_size is not None)
        self._names = {bid: name for name, bid in self._ids.items()}
        self._object_ids = [self._ids[b.name] for b in scene.bodies if b.role in PART_ROLES]
        self._nominal_ids = dict(self._ids)
        self._resized: dict[str, int] = {}
        self._names[self.robot] = ROBOT
        self._names[self.table] = TABLE
        self._nominal_link_mass = {
            link: client.getDynamicsInfo(self.robot, link)[0] for link in self._robot_links
        }
        self._nominal_link_inertia = {
            link: client.getDynamicsInfo(self.robot, link)[2] for link in self._robot_links
        }
        # Nominal inertia of each free body: changeDynamics(mass=...) rescales the *current*
        # inertia, so resets set both explicitly to keep episodes independent.
        self._nominal_body_inertia = {
            b.name: client.getDynamicsInfo(self._ids[b.name], -1)[2]
            for b in scene.bodies
            if b.joint == "free"
        }
        self._kp = np.concatenate([kin.arm_kp, [kin.finger_kp, kin.finger_kp]])
        self._kv = np.concatenate([kin.arm_kv, [kin.finger_kv, kin.finger_kv]])
        grip = min(kin.grip_force_n, kinematics.finger_effort)
        self._nominal_limit = np.concatenate([kinematics.effort, [grip, grip]])
        self._limit = self._nominal_limit.copy()
        self._gain = 1.0
        self._damping = np.zeros(n + 2)
        self._tau = np.zeros(n + 2)
        self._constraint: int | None = None
        self._peak: dict[tuple[str, str], float] = {}
        self._net_peak = np.zeros(3)
        self.attached: str | None = None
        self._state_id = client.saveState()

    # ------------------------------------------------------------------ episode

    def reset(self, init: InitialState, params: PhysicsParams) -> None:
        c = self.client
        self.detach()
        self._restore_nominal_parts()
        self._flush_contact_cache()
        self._peak = {}
        self._net_peak = np.zeros(3)
        c.restoreState(self._state_id)
        self._resize_parts(params.object_size_scale)
        for link in self._arm_links:
            mass = self._nominal_link_mass[link]
            if mass <= 0.0:
                continue
            scaled = mass * params.link_mass_scale
            if link == self._hand:
                scaled += params.payload_kg
            inertia = [v * params.link_mass_scale for v in self._nominal_link_inertia[link]]
            c.changeDynamics(self.robot, link, mass=scaled, localInertiaDiagonal=inertia)
        for body in self.scene.bodies:
            bid = self._ids[body.name]
            if body.joint == "free":
                # The mass knob is the scored object's; a tool keeps its mass.
                scale = params.object_mass_scale if body.role == "object" else 1.0
                # A resized part keeps its mass; its inertia follows the geometry (× s²).
                s2 = params.object_size_scale**2 if body.name in self._resized else 1.0
                inertia = self._nominal_body_inertia[body.name]
                c.changeDynamics(
                    bid,
                    -1,
                    mass=body.mass * scale,
                    localInertiaDiagonal=[v * scale * s2 for v in inertia],
                    lateralFriction=body.friction * params.friction_scale,
                )
            elif body.joint == "slide":
                # Coulomb slide friction as a zero-velocity motor with a force cap.
                c.setJointMotorControl2(
                    bid,
                    0,
                    pybullet.VELOCITY_CONTROL,
                    targetVelocity=0.0,
                    force=body.slide_friction_n * params.friction_scale,
                )
        set_contact_softness(self, params.contact_timeconst_s)
        c.changeDynamics(
            self.table, -1, lateralFriction=self.scene.table_friction * params.floor_friction_scale
        )
        if self.mobile is not None:
            base = self.mobile.base_link
            nominal = (self._nominal_link_mass[base], self._nominal_link_inertia[base])
            self.mobile.reset(nominal, init, params)
        self._gain = params.actuator_gain_scale
        self._limit = self._nominal_limit.copy()
        n = self.kin.n
        self._limit[n:] *= params.grip_force_scale
        self._damping = np.zeros(n + 2)
        self._damping[:n] = self.kin.damping * params.joint_damping_scale
        qs = np.concatenate([init.arm_q, [init.finger_q, init.finger_q]])
        for j, q in zip(self._joints, qs, strict=True):
            c.resetJointState(self.robot, j, float(q), 0.0)
        self._tau = np.zeros(n + 2)
        for body in self.scene.bodies:
            bid = self._ids[body.name]
            pos = np.asarray(init.body_pos.get(body.name, body.pos), dtype=float)
            if body.joint == "slide":
                c.resetBasePositionAndOrientation(bid, list(pos), [0.0, 0.0, 0.0, 1.0])
                c.resetJointState(bid, 0, float(init.slide_q.get(body.name, 0.0)), 0.0)
            else:
                quat = scene_parts.xyzw(yaw_quat(init.body_yaw.get(body.name, 0.0)))
                c.resetBasePositionAndOrientation(bid, list(pos), quat)
                c.resetBaseVelocity(bid, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])

    def _resize_parts(self, s: float) -> None:
        """Swap each free part for a copy scaled by `s` (see the module docstring)."""
        if s == 1.0:
            return
        c = self.client
        for k, body in enumerate(self.scene.bodies):
            if body.role != "object" or body.joint != "free":
                continue
            nominal = self._nominal_ids[body.name]
            scaled = scene_parts.scaled_body(body, s)
            bid = scene_parts.add_body(c, scaled, self.image_size is not None)
            # Parked far from everything and out of the table's collisions (it falls freely).
            c.setCollisionFilterPair(nominal, self.table, -1, -1, enableCollision=0)
            c.resetBasePositionAndOrientation(
                nominal, [1000.0 * (k + 1), 1000.0, 1000.0], [0, 0, 0, 1]
            )
            self._swap_id(body.name, nominal, bid)
            self._resized[body.name] = bid

    def _restore_nominal_parts(self) -> None:
        """Remove the resized parts of the last episode and bring the nominal ones back."""
        c = self.client
        for name, bid in self._resized.items():
            nominal = self._nominal_ids[name]
            c.removeBody(bid)
            c.setCollisionFilterPair(nominal, self.table, -1, -1, enableCollision=1)
            self._swap_id(name, bid, nominal)
        self._resized = {}

    def _swap_id(self, name: str, old: int, new: int) -> None:
        """Point every lookup of body `name` (contacts, poses, cameras) from `old` to `new`."""
        self._ids[name] = new
        self._names.pop(old, None)
        self._names[new] = name
        self._object_ids = [new if i == old else i for i in self._object_ids]
        if self._renderer is not None and name in self._renderer.bodies:
            _, link, body = self._renderer.bodies[name]
            self._renderer.bodies[name] = (new, link, body)

    def _flush_contact_cache(self) -> None:
        """Drop every cached contact manifold so no episode inherits the last one's contacts.

        restoreState resets positions and velocities but the broadphase keeps its overlapping
        pairs (with warm-started impulses); moving every body apart and running collision
        detection once removes them, so results do not depend on the previous episode.
        """
        c = self.client
        far = 100.0
        bodies = [self.robot, *self._ids.values()]
        for k, bid in enumerate(bodies):
            c.resetBasePositionAndOrientation(bid, [far * (k + 1), far, far], [0, 0, 0, 1])
        c.performCollisionDetection()

    def step(self, arm_cmd: np.ndarray, finger_cmd: float, substeps: int) -> None:
        c = self.client
        cmd = np.concatenate([arm_cmd, [finger_cmd, finger_cmd]])
        n = self.kin.n
        kp, kv = self._kp * self._gain, self._kv * self._gain
        peak: dict[tuple[str, str], float] = {}
        net_peak = np.zeros(3)
        mobile = self.mobile
        # The arm's and fingers' joints, then (on a mobile robot) the base's and the lift's:
        # one state query per physics step for both.
        joints = self._joints if mobile is None else [*self._joints, *mobile.joints]
        own = len(self._joints)  # the arm's n joints and the two fingers
        for _ in range(substeps):
            states = c.getJointStates(self.robot, joints)
            q_all = [s[0] for s in states]
            qd_all = [s[1] for s in states]
            if mobile is not None:
                mobile.apply(q_all[own:], qd_all[own:])
            q = np.array(q_all[:own])
            qd = np.array(qd_all[:own])
            tau = pd_torque(q, qd, cmd, kp, kv, self._limit)
            tau[n:] = scene_parts.coupled_finger_force(
                q[n:], qd[n:], finger_cmd, kp[n], kv[n], self._limit[n]
            )
            self._tau = tau
            # Passive joint damping acts outside the servo's torque limit, as in MuJoCo.
            c.setJointMotorControlArray(
                self.robot,
                self._joints,
                pybullet.TORQUE_CONTROL,
                forces=list(tau - self._damping * qd),
            )
            c.stepSimulation()
            # Contact forces after every physics step: peaks between control steps count.
            pairs, net = self._contacts_now()
            for key, force in pairs.items():
                if force > peak.get(key, 0.0):
                    peak[key] = force
            if net @ net > net_peak @ net_peak:
                net_peak = net
        self._peak = peak
        self._net_peak = net_peak

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        states = self.client.getJointStates(self.robot, self._joints)
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])

    def applied_torque(self) -> np.ndarray:
        return self._tau.copy()

    def _body_frame(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        bid = self._ids[name]
        if self.scene.body(name).joint == "slide":
            state = self.client.getLinkState(bid, 0, computeForwardKinematics=True)
            return np.array(state[4]), scene_parts.wxyz(state[5])
        pos, quat = self.client.getBasePositionAndOrientation(bid)
        return np.array(pos), scene_parts.wxyz(quat)

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return self._body_frame(name)

    def body_velocity(self, name: str) -> np.ndarray:
        bid = self._ids[name]
        if self.scene.body(name).joint == "slide":
            state = self.client.getLinkState(bid, 0, computeLinkVelocity=True)
            return np.array(state[6])
        return np.array(self.client.getBaseVelocity(bid)[0])

    def slide_q(self, name: str) -> float:
        return float(self.client.getJointState(self._ids[name], 0)[0])

    def finger_contact_forces(self, name: str) -> tuple[float, float]:
        c, bid = self.client, self._ids[name]
        left, right = self._fingers
        return (
            sum(abs(p[9]) for p in c.getContactPoints(self.robot, bid, left)),
            sum(abs(p[9]) for p in c.getContactPoints(self.robot, bid, right)),
        )

    def attach(self, name: str) -> None:
        c = self.client
        self.detach()
        bid = self._ids[name]
        child_link = 0 if self.scene.body(name).joint == "slide" else -1
        # Constraint frames are relative to each link's centre-of-mass frame.
        hand = c.getLinkState(self.robot, self._hand, computeForwardKinematics=True)
        hand_pos, hand_quat = np.array(hand[0]), scene_parts.wxyz(hand[1])
        if child_link == 0:
            state = c.getLinkState(bid, 0, computeForwardKinematics=True)
            obj_pos, obj_quat = np.array(state[0]), scene_parts.wxyz(state[1])
        else:
            p, q = c.getBasePositionAndOrientation(bid)
            obj_pos, obj_quat = np.array(p), scene_parts.wxyz(q)
        rel_pos = quat_to_matrix(hand_quat).T @ (obj_pos - hand_pos)
        rel_quat = quat_conj_mul(hand_quat, obj_quat)
        cid = c.createConstraint(
            self.robot,
            self._hand,
            bid,
            child_link,
            pybullet.JOINT_FIXED,
            [0.0, 0.0, 0.0],
            parentFramePosition=list(rel_pos),
            childFramePosition=[0.0, 0.0, 0.0],
            parentFrameOrientation=scene_parts.xyzw(rel_quat),
            childFrameOrientation=[0.0, 0.0, 0.0, 1.0],
        )
        c.changeConstraint(cid, maxForce=WELD_MAX_FORCE_N)
        self._constraint = cid
        self.attached = name

    def detach(self) -> None:
        if self._constraint is not None:
            self.client.removeConstraint(self._constraint)
            self._constraint = None
        self.attached = None

    def move_body(self, name: str, pos: np.ndarray) -> None:
        self.client.resetBasePositionAndOrientation(
            self._ids[name], list(map(float, pos)), [0.0, 0.0, 0.0, 1.0]
        )

    def contact_forces(self) -> dict[tuple[str, str], float]:
        """Peak over the last control step's physics steps (see `PhysicsBackend`)."""
        return dict(self._peak)

    def robot_external_force(self) -> np.ndarray:
        """Peak (by magnitude) net external force on the robot (3,) N (see `PhysicsBackend`)."""
        return self._net_peak.copy()

    def _contacts_now(self) -> tuple[dict[tuple[str, str], float], np.ndarray]:
        """The pair forces and the net external force on the robot now (`contacts_now`)."""
        return contacts_now(
            self.client, self.robot, self._object_ids, {self.table, self.robot}, self._names
        )

    def separation(self, bodies: Sequence[str], max_m: float) -> dict[str, float]:
        """Distance from the robot to each named body (`pybullet_contacts.separations`)."""
        ids = [self._ids[n] for n in bodies]
        return dict(zip(bodies, separations(self.client, self.robot, ids, max_m), strict=True))

    def nearest(self, bodies: Sequence[str], max_m: float) -> float:
        """Distance from the robot to the nearest named body (`pybullet_contacts.nearest`)."""
        return nearest(self.client, self.robot, [self._ids[n] for n in bodies], max_m)

    def diverged(self) -> bool:
        # PyBullet reports no instability flag; the environment checks state and speeds.
        return False

    def renderer(self) -> PybulletRenderer:
        """The TinyRenderer cameras of this client."""
        if self.image_size is None:
            raise EvalError("rendering: this backend was built without cameras", key="rendering")
        if self._renderer is None:
            bodies = {
                b.name: (self._ids[b.name], 0 if b.joint == "slide" else -1, b)
                for b in self.scene.bodies
            }
            self._renderer = PybulletRenderer(
                self.client, self.robot, self._hand, bodies, self.table, self.image_size
            )
        return self._renderer

    def set_appearance(self, appearance: Appearance) -> None:
        """Light intensity and body colours of the episode (cameras only)."""
        self.renderer().apply(appearance)

    def render(self, camera: str, depth: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """RGB and optional depth image of one camera (see `PybulletRenderer.render`)."""
        return self.renderer().render(camera, depth)

    def close(self) -> None:
        if self.client is not None:
            self.detach()
            self.client.disconnect()
            self.client = None  # type: ignore[assignment]
