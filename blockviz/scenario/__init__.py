"""Scenario files: the format (schema), safe located loading (load), prompt parts (tokens)."""
from blockviz.scenario.load import (
    LoadedScenario,
    ScenarioError,
    UnreadableFile,
    load,
    load_bytes,
    load_text,
)
from blockviz.scenario.schema import Scenario, Step, json_schema

__all__ = ["LoadedScenario", "Scenario", "ScenarioError", "Step", "UnreadableFile", "json_schema",
           "load", "load_bytes", "load_text"]
