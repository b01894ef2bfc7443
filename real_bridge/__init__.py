"""Real side of paired trials: a ROS 2 bridge to a physical robot, the twin robot, manual entry.

- `real_bridge.robot`: the small robot interface (connect / reset / observe / act / disconnect).
- `real_bridge.ros2_backend`: `Ros2Backend`, that interface over ROS 2 (rclpy, standard messages).
- `real_bridge.twin`: the twin robot, a separate ROS 2 process backed by its own physics with
  deliberate reality-gap parameters (what tests and the demo use as "the robot").
- `real_bridge.recording`: MCAP recording of every real episode, checksummed.
- `real_bridge.manual`: technician entry of a real episode (`embodied-eval trial record`).

The robot interface (default names; all configurable in `BridgeConfig`, see
`real_bridge.bridge_config`; JSON payloads in `real_bridge.interface`):

==========================  =====================================  ==========================
name                        type                                   direction, QoS
==========================  =====================================  ==========================
/joint_states               sensor_msgs/JointState                 robot → bridge, reliable
/wrench                     geometry_msgs/WrenchStamped            robot → bridge, reliable
/diagnostics                diagnostic_msgs/DiagnosticArray        robot → bridge (safety/*)
/episode/verdict            std_msgs/String (JSON)                 robot → bridge, TRANSIENT_LOCAL
/joint_trajectory/applied   trajectory_msgs/JointTrajectory        robot → bridge (echo)
/episode/manifest           std_msgs/String (JSON)                 bridge → robot, TRANSIENT_LOCAL
/joint_trajectory           trajectory_msgs/JointTrajectory        bridge → robot
/episode/reset|start|stop   std_srvs/Trigger                       bridge → robot
/robot/enable               std_srvs/SetBool                       bridge → robot
==========================  =====================================  ==========================

An episode: the bridge publishes the manifest, calls reset (the robot answers with the
manifest's SHA-256), enable and start; the robot runs the manifest's policy and publishes its
verdict; the bridge supervises the state stream and the safety diagnostics and records everything.

Nothing here imports rclpy at module import time except the modules that talk ROS
(`ros2_backend` on connect, `bridge_link`, `ros_node`, `twin.node`), so the CLI and manual entry
work without ROS installed.
"""
