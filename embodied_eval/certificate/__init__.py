"""Signed certificates and the reports users read.

`embodied-eval certify` computes the embodiment report and the AAI score of a protocol window,
assigns the level and writes a signed bundle; `embodied-eval verify` checks one.

Modules: `inputs` (the window's data from the store and the incident log), `compute` (E, the
score and the level from one RNG seed), `trials` and `incidents` (the technicians' and the
safety officers' sections), `assemble` (the certificate's JSON), `plots` (PNGs), `html_parts`
and `report_html` (the self-contained report), `bundle` (files,
hashes, signature), `verify` (signature and file checks), `issue` (certify, and recompute).
"""

from embodied_eval.certificate.bundle import write_bundle
from embodied_eval.certificate.issue import IssuedCertificate, issue_certificate, recompute_check
from embodied_eval.certificate.verify import VerifiedBundle, verify_bundle

__all__ = [
    "IssuedCertificate",
    "VerifiedBundle",
    "issue_certificate",
    "recompute_check",
    "verify_bundle",
    "write_bundle",
]
