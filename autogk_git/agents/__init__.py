"""Agents propose one change per experiment. Registry by key; SDKs are imported lazily."""
from __future__ import annotations

from typing import Callable

from autogk_git import env
from autogk_git.agents.base import Agent
from autogk_git.errors import ConfigError


# Each factory imports its agent's module when called, so that choosing one never imports another's SDK
# (the CLI's start-up and the tune agent stay free of anthropic).
def _tune(config) -> Agent:
    from autogk_git.agents.tune import TuneAgent
    return TuneAgent()


def _anthropic(config) -> Agent:
    from autogk_git.agents.anthropic_agent import AnthropicAgent
    return AnthropicAgent(config)


def _command(config) -> Agent:
    from autogk_git.agents.command import CommandAgent
    return CommandAgent(config)


AGENTS: dict[str, Callable[..., Agent]] = {"tune": _tune, "anthropic": _anthropic, "command": _command}
"""[agent] kind / --agent key -> factory(config). "auto" is resolved before the look-up (resolve_kind)."""


def resolve_kind(kind: str) -> str:
    if kind == "auto":
        return "anthropic" if env.has_anthropic_api_key() else "tune"
    return kind


def get_agent(kind: str, config) -> Agent:
    kind = resolve_kind(kind)
    factory = AGENTS.get(kind)
    if factory is None:
        keys = list(AGENTS)
        raise ConfigError(f"unknown agent '{kind}'", f"use --agent {', '.join(keys[:-1])} or {keys[-1]}")
    return factory(config)
