"""10,000 random and adversarial completions through the real loop and zoom tool.

Every completion ends as part of a recorded trajectory (format error, tool error, max turns
or an answer) within the turn limit; nothing raises, and every record serialises.
"""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from agent.loop import run_batch
from agent.policies.scripted import ScriptedPolicy
from agent.spectrum import Spectrum, SpectrumMeta
from agent.trajectory import Trajectory

pytestmark = pytest.mark.slow

N_COMPLETIONS = 10_000
MAX_TURNS = 8

TAGS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "\\boxed{",
    "}",
    "<tool_response>",
    "</tool_response>",
    "<|im_end|>",
    "<|image_pad|>",
]
NUMBERS = [
    4861,
    6563.0,
    -1,
    0,
    1e308,
    1e-300,
    3700,
    9100,
    20000,
    "NaN",
    "Infinity",
    "-Infinity",
    1e999,
    5000.00001,
    True,
    None,
    "4800",
    [],
    {},
]


def _adversarial_call(rng: random.Random) -> str:
    kind = rng.randrange(12)
    name = (
        "spectral_visualization_tool"
        if rng.random() < 0.85
        else rng.choice(["", "ls", "x" * 500, 7])
    )
    if kind == 0:  # numbers that JSON allows but physics does not
        lo, hi = rng.choice(NUMBERS), rng.choice(NUMBERS)
        lo_s = lo if isinstance(lo, str) else json.dumps(lo)
        hi_s = hi if isinstance(hi, str) else json.dumps(hi)
        body = (
            f'{{"name": {json.dumps(name)}, "arguments": {{"wavelength_range": [{lo_s}, {hi_s}]}}}}'
        )
    elif kind == 1:  # wrong shapes
        wr = rng.choice([[1], [1, 2, 3], "4800-4900", {"min": 1}, None, [[1, 2]], [5000, 4000]])
        body = json.dumps({"name": name, "arguments": {"wavelength_range": wr}})
    elif kind == 2:  # deeply nested JSON
        depth = rng.choice([50, 2000, 20000])
        body = (
            '{"name": "spectral_visualization_tool", "arguments": '
            + "[" * depth
            + "]" * depth
            + "}"
        )
    elif kind == 3:  # unexpected arguments, odd labels
        args = {
            "wavelength_range": [4800, 4900],
            rng.choice(["label", "lbl", "x"]): rng.choice(
                ["H-beta", 5, None, ["a"], "\u202e\ud7ff" * 50, "<script>alert(1)</script>"]
            ),
        }
        body = json.dumps({"name": name, "arguments": args})
    elif kind == 4:  # truncated JSON
        full = json.dumps({"name": name, "arguments": {"wavelength_range": [4800, 4900]}})
        body = full[: rng.randrange(len(full))]
    elif kind == 5:  # arguments as a string, sometimes broken
        body = json.dumps(
            {"name": name, "arguments": rng.choice(['{"wavelength_range": [6500, 6600]}', "{oops"])}
        )
    elif kind == 6:  # windows partly or wholly outside the data, or vanishingly narrow
        lo = rng.uniform(-1e5, 2e5)
        body = json.dumps(
            {
                "name": name,
                "arguments": {"wavelength_range": [lo, lo + rng.choice([1e-9, 0.5, 50, 5e4])]},
            }
        )
    else:  # plausible zooms
        lo = rng.uniform(3600, 9000)
        body = json.dumps(
            {
                "name": name,
                "arguments": {
                    "wavelength_range": [lo, lo + rng.uniform(5, 800)],
                    "label": "feature",
                },
            }
        )
    think = rng.choice(
        ["<think>zoom</think>", "", "<think>", "</think>", "<think>a</think><think>b</think>"]
    )
    close = rng.choice(["</tool_call>"] * 5 + ["", "</tool_call></tool_call>"])
    return f"{think}<tool_call>{body}{close}" + rng.choice(
        ["", "<tool_call>{}</tool_call>", "<answer>\\boxed{YES}</answer>"]
    )


def _zoom_only(rng: random.Random) -> str:
    """A well-formed call whose window may lie anywhere (inside, clipped, refused)."""
    lo = rng.uniform(-2e4, 2e4)
    args = {"wavelength_range": [lo, lo + rng.choice([0.5, 50, 5e3])]}
    body = json.dumps({"name": "spectral_visualization_tool", "arguments": args})
    return f"<think>again</think><tool_call>{body}</tool_call>"


def _adversarial_answer(rng: random.Random) -> str:
    box = rng.choice(["YES", "NO", "yes", " No ", "MAYBE", "", "{YES}", "YES}", "\\text{YES}"])
    body = rng.choice([f"\\boxed{{{box}}} because", f"\\boxed{box}", box, f"\\boxed{{{box}}}" * 2])
    answer = rng.choice(
        [
            f"<answer>{body}</answer>",
            f"<answer>{body}",
            f"{body}</answer>",
            f"<answer><answer>{body}</answer></answer>",
            body,
        ]
    )
    think = rng.choice(["<think>sure</think>", "", "<think>", "<think></think></think>"])
    return think + answer


def _random_text(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return "".join(
            chr(rng.randrange(0, 0x10FFFF))
            for _ in range(rng.randrange(0, 60))
            if not 0xD800 <= rng.randrange(0, 0x10FFFF) < 0xE000
        )
    if kind == 1:
        return "".join(
            rng.choice(TAGS + ["x", " ", "{", '"', "\n"]) for _ in range(rng.randrange(0, 40))
        )
    if kind == 2:
        return rng.choice(["", " ", "\n", "\x00", "\ud800", "null", "{}", "None"])
    if kind == 3:
        return "A" * rng.choice([10_000, 200_000])
    return bytes(rng.randrange(256) for _ in range(rng.randrange(80))).decode("latin-1")


def completion(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        return _adversarial_call(rng)
    if r < 0.7:
        return _adversarial_answer(rng)
    return _random_text(rng)


def spectrum(i: int) -> Spectrum:
    rng = np.random.default_rng(i)
    wave = np.linspace(3700.0, 9100.0, 3909)
    flux = 1.0 + rng.normal(0, 0.05, wave.size)
    if i % 7 == 0:
        flux[rng.integers(0, wave.size, 200)] = np.nan  # gaps
    return Spectrum(
        wave, flux, redshift=float(rng.choice([0.0, 0.01, -0.001])), meta=SpectrumMeta(id=f"s{i}")
    )


def _shard(seed: int, n_completions: int) -> dict:
    """Run episodes until `n_completions` completions are used; check each; return counts."""
    rng = random.Random(seed)
    used = 0
    counts = {
        "trajectories": 0,
        "done": 0,
        "max_turns": 0,
        "format_errors": 0,
        "tool_errors": 0,
        "answered_ok": 0,
    }
    i = seed * 1_000_000
    while used < n_completions:
        # each episode gets its own script of up to MAX_TURNS completions
        batch, scripts = [], {}
        for _ in range(64):
            sid = f"s{i}"
            if i % 10 == 0:  # some episodes only ever zoom, to reach the turn limit
                scripts[sid] = [_zoom_only(rng) for _ in range(MAX_TURNS)]
            else:
                scripts[sid] = [completion(rng) for _ in range(MAX_TURNS)]
            batch.append((spectrum(i), "cv" if i % 2 else "carbon"))
            i += 1
        out = run_batch(batch, ScriptedPolicy(scripts=scripts), max_turns=MAX_TURNS)
        for t in out:
            used += len(t.steps)
            assert t.state in ("done", "max_turns"), (t.id, t.state, t.error)
            assert 1 <= len(t.steps) <= MAX_TURNS
            if t.state == "max_turns":
                assert len(t.steps) == MAX_TURNS and t.verdict is None
            assert t.verdict in ("YES", "NO", None)
            again = Trajectory.from_json(t.to_json())
            assert again.to_json() == t.to_json()
            counts["trajectories"] += 1
            counts[t.state] += 1
            counts["format_errors"] += not t.format_ok
            counts["tool_errors"] += sum(1 for s in t.steps if s.error and "tool error" in s.error)
            counts["answered_ok"] += bool(t.format_ok and t.verdict)
    counts["completions"] = used
    return counts


def test_ten_thousand_malformed_completions_end_as_records():
    # Two processes (CI has two cores); each shard checks every trajectory it makes.
    t0 = time.perf_counter()
    shards = 2
    with ProcessPoolExecutor(max_workers=shards) as pool:
        parts = list(pool.map(_shard, range(1, shards + 1), [N_COMPLETIONS // shards] * shards))
    total = {k: sum(p[k] for p in parts) for k in parts[0]}
    print(f"{total} in {time.perf_counter() - t0:.1f} s")
    assert total["completions"] >= N_COMPLETIONS
    # the mix really exercised every ending
    assert total["done"] and total["max_turns"] and total["format_errors"]
    assert total["tool_errors"] and total["answered_ok"]
