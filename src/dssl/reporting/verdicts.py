"""This build's verdicts beside those the same pipeline gave elsewhere (on other CPU kernels).

A trained model's bits follow the kernels torch, oneDNN and MKL pick for the CPU, so at small scale a
claim whose paired difference sits near 0 can change verdict with the machine. A finished run's claims
(``claims.csv``) recorded with its source (``dssl verdicts export``: the params file's and the code's
digests, the hardware, the kernel pins) are *verdict records*; the report lists each record's verdicts
beside its own and calls a claim **fragile** where a record made with the same params and code gives
another verdict. A record from other params or code is shown with that warning and marks nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pandas as pd

from dssl.reporting.claims import Finding

KEY = ["section", "claim", "cells"]   # a claim's identity across runs: its section, wording and compared cells
NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class VerdictRecord:
    """The claims of one run elsewhere: ``label`` (a name for where it ran), ``source`` (what it ran:
    ``params_digest``, ``code_digest``, ``hardware``, ``kernels``, ``commit``, ``created``), its ``claims``
    (the rows of its claims.csv) and whether it ran this build's params and code (``comparable``)."""

    label: str
    source: Mapping[str, Any]
    claims: pd.DataFrame
    comparable: bool

    def describe(self) -> str:
        """One line: where and what it ran, and whether its verdicts are compared."""
        source = self.source
        pins = [f"{k}={v}" for k, v in (source.get("kernels") or {}).items()]
        hardware = "; ".join(source.get("hardware") or []) or "hardware not recorded"
        # result files name the pins they ran under (``tracking.lineage.hardware_label``); older records did not
        kernels = ("no kernel pins" if not pins else
                   "" if all(pin in hardware for pin in pins) else ", ".join(pins))
        state = ("the same params and code as this build: its verdicts are compared" if self.comparable else
                 "**other params or code than this build** (params "
                 f"{str(source.get('params_digest', '?'))[:8]}, code {str(source.get('code_digest', '?'))[:8]}): "
                 "shown, not compared")
        commit = str(source.get("commit") or "?")[:10]
        return (f"`{self.label}`: {hardware}{', ' + kernels if kernels else ''}; commit {commit}, "
                f"recorded {source.get('created', '?')}; {state}")


    def kernel_kinds(self) -> set[str]:
        """The CPU kernel kinds its results were computed with: the pinned ``ATEN_CPU_CAPABILITY``, else each
        hardware line's (``kernel_kinds``)."""
        pinned = (self.source.get("kernels") or {}).get("ATEN_CPU_CAPABILITY")
        return {str(pinned).upper()} if pinned else kernel_kinds(self.source.get("hardware") or [])


def kernel_kinds(hardware: Iterable[str]) -> set[str]:
    """The kernel kinds (``AVX2``, ``AVX512``, ...) named by hardware lines of result files
    (``tracking.lineage.hardware_label``: ``<cpu> (<capability>), torch <version>``)."""
    return {found.group(1).upper() for line in hardware if (found := re.search(r"\((\w+)\)(?=,|$)", str(line)))}


def _key(section: str, claim: str, cells: str) -> tuple[str, str, str]:
    return section, claim, cells


def verdicts_elsewhere(findings: list[Finding], records: list[VerdictRecord]) -> pd.DataFrame:
    """One row per finding: its claim, cells and verdict here, each record's verdict on the same claim and
    cells (``not checked`` when the record has none) and ``fragile``: a comparable record disagrees."""
    elsewhere = {r.label: {_key(*row): verdict for *row, verdict in
                           r.claims[[*KEY, "verdict"]].itertuples(index=False, name=None)} for r in records}
    rows = []
    for f in findings:
        key = _key(f.section, f.claim, f.cells)
        there = {r.label: elsewhere[r.label].get(key, NOT_CHECKED) for r in records}
        fragile = any(r.comparable and _disagrees(there[r.label], f.verdict) for r in records)
        rows.append({"section": f.section, "claim": f.claim, "subject": f.subject, "cells": f.cells,
                     "verdict": f.verdict, **there, "fragile": fragile})
    return pd.DataFrame(rows, columns=[*KEY[:2], "subject", "cells", "verdict", *(r.label for r in records), "fragile"])


def _disagrees(there: str, here: str) -> bool:
    """A record's verdict disagrees with this build's: it checked the claim and found otherwise."""
    return there not in (here, NOT_CHECKED)


def disagreeing_records(table: pd.DataFrame, records: list[VerdictRecord]) -> list[str]:
    """The labels of the comparable records that give another verdict on at least one row of
    :func:`verdicts_elsewhere`'s ``table``."""
    return [r.label for r in records if r.comparable and r.label in table
            and any(_disagrees(there, here) for there, here in zip(table[r.label], table["verdict"]))]


def fragile_keys(table: pd.DataFrame) -> set[tuple[str, str, str]]:
    """The (section, claim, cells) of the fragile rows of :func:`verdicts_elsewhere`."""
    if table.empty:
        return set()
    return {_key(*row) for row in table.loc[table["fragile"], KEY].itertuples(index=False, name=None)}


def is_fragile(finding: Finding, fragile: set[tuple[str, str, str]]) -> bool:
    return _key(finding.section, finding.claim, finding.cells) in fragile
