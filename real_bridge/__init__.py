"""Real side of paired trials: the harness that runs real episodes over ROS 2, the robot side
(robot profiles and the twin robot), and manual entry.

The package reads one way, in two rooms:

- **harness side** (imports nothing from the robot side): `robot` (the one step-level `Robot`
  interface the episode drives), `episodes` (`EpisodeBackend`: the runner's per-episode backend
  over any `Robot`), `ros2_backend` (`Ros2Backend`, the "ros2" robot backend: episodes over
  `bridge_link.Ros2Robot` plus the MCAP recording) → `supervision` (one episode: homing, setup,
  loop, judge, record) →
  `policy_loop` (observe → policy → check → command, latency), `observation` (policy observation
  and action conversion), `command_check` (limits before anything moves), `judges` (technician,
  detector, oracle), `detector` (the success detector, judging from the recorded camera and
  tracker; `rejudge` replays it on an MCAP, `judge_accuracy` its measured accuracy),
  `bridge_link` (`Ros2Robot`: the `Robot` over ROS 2 — topics, heartbeat, scene-reset client),
  `recording` (MCAP).
- **robot side**: `profiles/*.toml` (the twin, franka_ros2, ur_robot_driver naming and limits) and
  `twin` (a separate process playing a ros2_control robot from its own physics, with a documented
  physical reality gap; it runs no policy) and `mujoco_robot` (`MujocoRobot`, the "mujoco"
  backend: the twin's plant as a `Robot` in the harness's process, no ROS).
- **shared, no ROS at import**: `bridge_config` (profiles, QoS, deadlines), `interface` (JSON
  payloads, safety diagnostics, the trajectory rules of a joint_trajectory_controller), `safety`,
  `discovery`, `ros_node` (rclpy plumbing), `robot_profile` (limits and the kinematics entry).
- `manual` / `entry` / `start_time`: technician entry of a real episode (`embodied-eval trial record`).

The robot interface (ros2_control conventions; names from the profile, see `BridgeConfig.topics`)
is described in docs/technician.md ("The robot") and in `real_bridge.bridge_config.TopicNames`.

Nothing here imports rclpy at module import time except the modules that talk ROS
(`bridge_link`, `ros_node`, `twin.node`), so the CLI and manual entry work without ROS installed.
"""
