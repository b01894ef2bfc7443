"""Real-to-sim calibration: fit the simulator's physical parameters to recorded real episodes.

A real episode's MCAP recording holds the commands the harness sent, the robot's joint states
and efforts, its wrench and the object tracker. `recorded` reads them onto the robot's clock;
`replay` plays the commands into the MuJoCo model of the pair's scene the way a ros2_control robot
follows them; `fit` finds the parameters (`params`) that make the replay match the recording with
scipy's least squares, with 95 % intervals from the Jacobian and an identifiability verdict per
parameter; `report` writes the calibration file and the HTML report with overlays.
"""
