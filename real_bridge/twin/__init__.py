"""The twin robot: a separate OS process that is a real ROS 2 node backed by its own physics.

It stands in for the physical robot in tests and the demo, serving exactly the interface the
bridge drives (see `real_bridge.twin.node`), with a deliberate reality gap (see
`real_bridge.twin.settings`). Start it with `python -m real_bridge.twin` or
`embodied-eval twin run`, or from Python with `real_bridge.twin.process.TwinProcess`.
"""
