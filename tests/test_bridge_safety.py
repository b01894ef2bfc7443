"""The bridge's safety tracker: one event per robot event, stops, clears (no ROS needed)."""

from __future__ import annotations

from real_bridge.safety_state import DiagnosticReading, SafetyTracker


def reading(t, name, level, *values, message="m"):
    return DiagnosticReading(received_s=t, name=name, level=level, message=message, values=values)


def test_latched_stop_republished_with_an_event_id_counts_once():
    tracker = SafetyTracker("ep1", started_s=100.0)
    stop = ("safety/protective_stop", 2, ("episode_id", "ep1"), ("event_id", "s1"))
    first = tracker.feed(reading(100.5, *stop))
    assert first is not None and first.kind == "protective_stop"
    assert first.t_s == 0.5  # 100.5 − 100.0: no t_s from the robot, the bridge's clock
    for t in (101.0, 101.5, 102.0):
        assert tracker.feed(reading(t, *stop)) is None
    assert len(tracker.events) == 1
    assert tracker.protective_stop and tracker.stop_received_s == 100.5
    tracker.feed(reading(103.0, "safety/protective_stop", 0))
    assert not tracker.protective_stop


def test_without_event_ids_each_rising_edge_is_one_event():
    tracker = SafetyTracker("ep1", started_s=0.0)
    sep = ("safety/separation", 1, ("separation_m", "0.4"), ("protective_separation_m", "0.6"))
    assert tracker.feed(reading(1.0, *sep)) is not None
    assert tracker.feed(reading(1.5, *sep)) is None  # still active
    tracker.feed(reading(2.0, "safety/separation", 0))
    second = tracker.feed(reading(3.0, *sep))
    assert second is not None and second.separation_m == 0.4
    assert len(tracker.events) == 2
    assert tracker.stop_event is None  # a separation warning does not stop the robot


def test_events_of_another_episode_and_non_safety_statuses_are_ignored():
    tracker = SafetyTracker("ep2")
    assert tracker.feed(reading(1.0, "safety/contact", 2, ("episode_id", "ep1"))) is None
    assert tracker.feed(reading(1.0, "motor/temperature", 2)) is None
    tracker.feed(reading(1.0, "robot/state", 0, ("enabled", "true")))
    assert tracker.enabled is True
    assert tracker.events == []
