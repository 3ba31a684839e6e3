"""P(YES) from a model's token probabilities at its boxed verdict.

The hf, vllm and openai backends all read their confidence at the same place in the answer
turn; this is that place (found with the protocol's box pattern) and that arithmetic.
"""

from __future__ import annotations

import math
import re

from agent.protocol import BOXED_OPEN

# A box inside an answer block, else any box: where the verdict's first character follows.
_VERDICT_POS = re.compile("<answer>.*?" + BOXED_OPEN.pattern, re.DOTALL)


def verdict_char_index(text: str) -> int | None:
    """Index in `text` of the first character of the boxed verdict (YES/NO), or None.

    The token generated at this character is where a model decided its answer; backends
    read P(YES) from their token probabilities there.
    """
    for pattern in (_VERDICT_POS, BOXED_OPEN):
        found = list(pattern.finditer(text))
        m = found[-1] if found else None  # the last: the verdict that counts is the final one
        if m is not None and m.end() < len(text) and text[m.end()].upper() in "YN":
            return m.end()
    return None


def yes_share(prefix: str, logprobs: dict[str, float]) -> float | None:
    """P(YES) / (P(YES) + P(NO)) from candidate tokens at the verdict position.

    `logprobs` maps token strings to log-probabilities (the top-k a backend returns);
    `prefix` is the part of the chosen token before the verdict (often "" or "{"). A token
    counts for YES when, after the prefix, it begins a case variant of YES ("Y", "YES",
    "Yes", " yes"), likewise for NO. None when neither side has any mass.
    """
    yes = no = 0.0
    for tok, lp in logprobs.items():
        if not isinstance(tok, str) or not tok.startswith(prefix):
            continue
        rest = tok[len(prefix) :].strip().upper()
        if not rest or lp is None or not math.isfinite(lp):
            continue
        if "YES".startswith(rest[:3]):
            yes += math.exp(lp)
        elif "NO".startswith(rest[:2]) and not rest.startswith("NON"):
            no += math.exp(lp)
    if yes + no <= 0.0:
        return None
    return yes / (yes + no)
