"""Shared pieces of the settings schema."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Strict

#: A whole number as YAML writes one: ``true`` (a bool, which Python counts as 1), ``"4"`` and ``4.0`` are refused.
Int = Annotated[int, Strict()]
#: A number as YAML writes one: ``true`` is refused; ``.inf`` and ``.nan`` are refused by every section
#: (``allow_inf_nan``): a limit of infinity is a check that can never fail.
Real = Annotated[float, Strict()]


class Section(BaseModel):
    """Every settings section refuses unknown keys: a typo must not pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
