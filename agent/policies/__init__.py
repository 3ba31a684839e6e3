"""Policies (backends) that play the assistant; see `agent.policies.base` for the protocol.

`get_policy(name, **kwargs)` imports a backend only when it is chosen, so `rules` never
pulls in torch, httpx or vllm.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> (module, class); kept as data so importing this package imports no backend
POLICIES: dict[str, tuple[str, str]] = {
    "rules": ("agent.policies.rules", "RulesPolicy"),
    "hf": ("agent.policies.hf", "HFPolicy"),
    "openai": ("agent.policies.openai", "OpenAIPolicy"),
    "vllm": ("agent.policies.vllm", "VLLMPolicy"),
    "scripted": ("agent.policies.scripted", "ScriptedPolicy"),
}


def get_policy(name: str, **kwargs: Any) -> Any:
    """Build the policy called `name` with its keyword arguments (model, base_url, ...)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}")
    module_name, class_name = POLICIES[name]
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(**kwargs)
