"""The export is gzipped only when Accept-Encoding allows gzip, q-values read as RFC 9110 says."""

from __future__ import annotations

import pytest

from api.domain.exports.services import accepts_gzip


@pytest.mark.parametrize(
    ("header", "gzip"),
    [
        ("", False),
        ("gzip", True),
        ("GZIP", True),
        ("x-gzip", True),
        ("deflate, gzip;q=0.5", True),
        ("br;q=1.0, gzip; q=0.001", True),
        ("gzip;q=0", False),
        ("gzip; Q=0.000", False),
        ("gzip;q=0, *", False),  # named beats the wildcard, whatever the order
        ("*, gzip;q=0", False),
        ("*", True),
        ("*;q=0", False),
        ("*;q=0, gzip", True),
        ("identity", False),
        ("deflate, br", False),
        ("gzip;level=9;q=0", False),  # a q after another parameter still counts
        ("gzip;level=9", True),
        ("gzip;q=2", False),  # not a q-value: not taken as consent
        ("gzip;q=nan", False),
        ("gzip;q=0.5000", False),
        ("gzipped", False),
    ],
)
def test_accept_encoding_is_parsed_with_q_values(header: str, gzip: bool) -> None:
    assert accepts_gzip(header) is gzip
