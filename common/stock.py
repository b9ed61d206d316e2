"""The label stock a site prints its cable labels on. Named in common/ rather than beside the
labels' content (`contract.labels`) or their geometry (`draw.labels`), which both use it:
the CLI's parser offers the stocks as choices, and drawing up `--help` must not load the
contract's models (pydantic and every record: three quarters of a cold `--help`)."""

from __future__ import annotations

from enum import StrEnum


class LabelStock(StrEnum):
    """Label stock the cable label sheets are laid out on; geometry in `draw/labels.py`."""

    WRAP_LETTER = "wrap-letter"
    AVERY_5160 = "avery-5160"
    AVERY_L7163 = "avery-l7163"
