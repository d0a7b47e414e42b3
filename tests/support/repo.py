"""The checkout the tests run from."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository the tests belong to: its docs, README, locks and Makefile are what the repo
tier checks, whichever lambdalake (checkout or installed package) the tests import."""
