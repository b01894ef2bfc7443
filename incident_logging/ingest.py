"""Turn the safety events the runner stored with episodes into automatic incidents.

Each event is classified with the protocol's threshold table; events on which no rule fires are
not incidents and are skipped. An incident is keyed by (episode_id, event ordinal), so ingesting
twice adds nothing. Everything is appended in one transaction: a malformed event writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, SafetyEvent, iso_utc, parse_utc
from embodied_eval.store.core import Store, default_db_path
from incident_logging.classifier import CLASSIFIER_VERSION, classify
from incident_logging.ids import auto_incident_id
from incident_logging.record import MEASUREMENT_KEYS, SIM_JUSTIFICATION, IncidentRecord
from incident_logging.store import IncidentStore
from incident_logging.thresholds import ThresholdTable, threshold_table


def incident_from_event(
    event: SafetyEvent,
    episode: Episode,
    ordinal: int,
    table: ThresholdTable,
    *,
    protocol: Protocol,
    robot_id: str | None = None,
    software_version: str = "",
    safety_config_hash: str = "",
) -> IncidentRecord | None:
    """The automatic incident for one safety event, or None when no rule fires.

    Args:
        event: the event as the monitor / robot safety system reported it.
        episode: the episode it happened in (side, window, start time, artifacts).
        ordinal: the event's position among the episode's events (the idempotency key).
        table: thresholds to classify with.
        protocol: gives the window and protocol hash when the episode lacks them.
        robot_id: robot id for real-side incidents (default: the protocol's `[real] robot_id`).
        software_version, safety_config_hash: identity fields to record.
    """
    result = classify(event, table)
    if result.severity is None:
        return None
    occurred = iso_utc(
        parse_utc(episode.started_at, key="started_at") + timedelta(seconds=event.t_s)
    )
    real = episode.side == "real"
    measurements = {
        k: v
        for k, v in event.to_dict().items()
        if k in MEASUREMENT_KEYS and v is not None and v is not False and v != ""
    }
    step = f", step {event.step}" if event.step is not None else ""
    record = IncidentRecord(
        incident_id=auto_incident_id(episode.episode_id, ordinal),
        window=episode.window or protocol.window_id,
        occurred_at=occurred,
        detected_at=occurred,
        event_type=event.kind,
        source="auto",
        provisional_severity=result.severity,
        protocol_hash=episode.protocol_hash or protocol.protocol_hash,
        run_id=episode.pair_id,
        episode_id=episode.episode_id,
        event_ordinal=ordinal,
        robot_id=(robot_id or protocol.robot_id) if real else f"sim:{episode.engine}",
        software_version=software_version,
        safety_config_hash=safety_config_hash,
        side=episode.side,
        detector_rule_id=event.source_rule or f"monitor:{event.kind}",
        detector_version=f"{CLASSIFIER_VERSION}/{table.version}",
        stop_category=event.stop_category,
        measurements=measurements,
        injury_level=event.injury_level or "none",
        damage_cost=event.damage_cost,
        task_before=f"{episode.task_id} (policy {episode.policy})",
        what_happened=event.detail
        or f"{event.kind.replace('_', ' ')} at t = {event.t_s:g} s{step}",
        evidence=episode.artifacts,
        counts_toward_window=real,
        counts_justification="" if real else SIM_JUSTIFICATION,
    )
    return record.with_classification(result)


def check_safety_events(events: Sequence[SafetyEvent], protocol: Protocol | None) -> None:
    """Refuse, before they are stored, safety events the classifier would refuse (an undeclared
    contact partner, an unknown body region, a missing measurement): EvalError naming the event
    (1-based) and what to fix."""
    table = threshold_table(protocol.safety_thresholds if protocol is not None else None)
    for number, event in enumerate(events, start=1):
        try:
            classify(event, table)
        except EvalError as exc:
            raise EvalError(f"incident #{number}: {exc}", key=exc.key) from None


def ingest_safety_events(
    db_path: str | os.PathLike[str] | None,
    protocol: Protocol,
    robot_id: str | None = None,
    *,
    software_version: str = "",
    safety_config_hash: str = "",
) -> int:
    """Classify every stored safety event into automatic incidents; returns how many are new.

    Args:
        db_path: the store (None: `embodied_eval.store.core.default_db_path()`).
        protocol: the protocol whose `[incidents.thresholds]` classify the events.
        robot_id: robot id for real-side incidents (default: the protocol's).
        software_version, safety_config_hash: recorded in each new incident.

    Raises:
        EvalError naming the episode and event when an event cannot be read or classified.
    """
    db = Path(db_path) if db_path is not None else default_db_path()
    table = threshold_table(protocol.safety_thresholds)
    records: list[IncidentRecord] = []
    with IncidentStore(db) as log:
        # The runner ingests after every episode: skip what is already in the log up front.
        done = log.ingested_event_keys()
    with Store(db) as core:
        episodes: dict[str, Episode] = {}
        for raw in core.safety_events():
            episode_id = raw.pop("episode_id")
            ordinal = int(raw.pop("ordinal"))
            if f"{episode_id}#{ordinal}" in done:
                continue
            where = f"episode {episode_id} safety event #{ordinal}"
            try:
                event = SafetyEvent.from_dict(raw)
                if episode_id not in episodes:
                    found = core.get_episode(episode_id)
                    if found is None:
                        raise EvalError("its episode is not in the store")
                    episodes[episode_id] = found
                record = incident_from_event(
                    event,
                    episodes[episode_id],
                    ordinal,
                    table,
                    protocol=protocol,
                    robot_id=robot_id,
                    software_version=software_version,
                    safety_config_hash=safety_config_hash,
                )
            except EvalError as exc:
                raise EvalError(f"{where}: {exc}", key=exc.key) from None
            if record is not None:
                records.append(record)
    with IncidentStore(db) as store:
        return len(store.append_incidents(records, table=table))
