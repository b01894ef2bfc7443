"""The twin robot (the robot side): a separate OS process that is a real ROS 2 node backed by its
own physics, playing a plain ros2_control robot.

It stands in for the physical robot in tests and the demo, serving the interface of the twin
profile (`real_bridge/profiles/twin.toml`, see `real_bridge.twin.node`) with a documented
physical reality gap (`real_bridge.twin.settings.TwinGap`). It follows trajectories, streams
state, wrench, an object tracker and a camera, holds on the deadman, and runs no policy. Start it
with `python -m real_bridge.twin` or `embodied-eval twin run`, or from Python with
`real_bridge.twin.process.TwinProcess`. It imports nothing from the harness side.
"""
