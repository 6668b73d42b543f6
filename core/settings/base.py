"""Shared pieces of the settings schema."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Every settings section refuses unknown keys: a typo must not pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)
