"""Agents propose one change per experiment. Registry by key; SDKs are imported lazily."""
from __future__ import annotations

from autogk_git import env
from autogk_git.agents.base import Agent
from autogk_git.errors import ConfigError


def resolve_kind(kind: str) -> str:
    if kind == "auto":
        return "anthropic" if env.has_anthropic_api_key() else "tune"
    return kind


def get_agent(kind: str, config) -> Agent:
    kind = resolve_kind(kind)
    if kind == "tune":
        from autogk_git.agents.tune import TuneAgent
        return TuneAgent()
    if kind == "anthropic":
        from autogk_git.agents.anthropic_agent import AnthropicAgent
        return AnthropicAgent(config)
    if kind == "command":
        from autogk_git.agents.command import CommandAgent
        return CommandAgent(config)
    raise ConfigError(f"unknown agent '{kind}'", "use --agent tune, anthropic or command")
