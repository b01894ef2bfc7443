"""A stored window with known numbers, for the console's tests.

Protocol: one family (pick_place, 3 instances), two drift days (nominal = day 0, day07 = day 7),
6 seeds per instance, every pair also real: 18 real and 18 sim rows per day. Anytime stopping
on (mixture, AR ≥ 0.75, min_trials 30, so no decision comes before the 30th real trial).

Stored (real side, in manifest order):
- day 0: the first 12 rows scored, 9 successes (the last 3 of the 12 fail); the 13th row aborted
  on its only allowed attempt (max_retries 0); 5 rows not run;
- day 7: all 18 rows scored, all successes.
So the real side has 30 scored trials with 27 successes. Sim side, day 0: the first 4 rows
scored, 3 successes; day 7: nothing.

By hand (notes/statistics.md): Wilson 95 % of 9/12 = [0.4677, 0.9111]; the Robbins mixture
confidence sequence at 27/30 = [0.6513, 0.9921] (95 %): the AR ≥ 0.75 gate is undecided.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import Protocol, protocol_from_mapping
from embodied_eval.store.core import Store

PROTOCOL = """
[protocol]
name = "console-window"
version = "1"
base_seed = 11
m_min = 3
[window]
id = "w-console"
start = 2026-11-01
end = 2026-11-30
[battery.pick_place]
instances = ["pick_place/cube_center", "pick_place/cube_left", "pick_place/cube_right"]
[sampling]
seeds_per_instance = 6
drifts = ["nominal", "day07"]
real_fraction = 1.0
[drift.nominal]
day = 0
[drift.day07]
day = 7
payload_kg = 0.25
[sim]
engines = ["mujoco"]
[real]
backend = "ros2"
[stopping]
enabled = true
ar_threshold = 0.75
min_trials = 30
max_trials = 400
"""


def stored_window(tmp_path: Path) -> tuple[Protocol, Path, str]:
    """Write the protocol file and the store described in the module docstring; returns the
    protocol, the store path and the manifest hash."""
    protocol = protocol_from_mapping(tomllib.loads(PROTOCOL))
    (tmp_path / "protocol.toml").write_text(PROTOCOL, encoding="utf-8")
    manifest = plan_manifest(protocol)
    db = tmp_path / "store.db"
    real = {0: [], 7: []}
    sim0 = []
    days = {d.name: d.day for d in protocol.drifts}
    for spec in manifest.specs:
        if spec.side == "real":
            real[days[spec.drift_name]].append(spec)
        elif days[spec.drift_name] == 0:
            sim0.append(spec)
    assert len(real[0]) == len(real[7]) == 18 and len(sim0) == 18
    hour = iter(range(10_000))

    def started() -> str:
        n = next(hour)
        return f"2026-11-02T{8 + n // 60:02d}:{n % 60:02d}:00Z"

    with Store(db) as store:
        store.write_manifest(
            manifest.manifest_hash,
            protocol.protocol_hash,
            protocol.window_id,
            manifest.to_dict(),
        )
        for i, spec in enumerate(real[0][:13]):
            if i == 12:
                ep = spec.to_episode(
                    0.0, status="aborted", duration_s=3.0, started_at=started(),
                    status_reason="the robot stopped answering",
                )  # fmt: skip
            else:
                ep = spec.to_episode(0.9 if i < 9 else 0.3, duration_s=20.0, started_at=started())
            store.write_episode(ep)
        for spec in real[7]:
            store.write_episode(spec.to_episode(0.95, duration_s=20.0, started_at=started()))
        for i, spec in enumerate(sim0[:4]):
            store.write_episode(
                spec.to_episode(0.9 if i < 3 else 0.1, duration_s=5.0, started_at=started())
            )
    return protocol, db, manifest.manifest_hash


def self_signed_tls(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost and its key (PEM files), made
    with `cryptography`; a client trusts it by loading the certificate as its CA."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
