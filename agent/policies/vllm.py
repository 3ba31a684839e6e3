"""`vllm`: the vLLM offline engine, for batch runs on GPUs.

vLLM is imported only when this policy is built (it is GPU-only: requirements-gpu.txt).
Each turn of a batch becomes one `LLM.generate` call over all active episodes: the prompt
text comes from the checkpoint's own chat template (as in `hf`, so both backends see the
same tokens) and the episode's images go in `multi_modal_data`. Confidence is P(YES) from
the returned top-k log-probabilities at the boxed verdict.
"""

from __future__ import annotations

from typing import Any

from agent.policies.base import Episode, Reply
from agent.policies.hf import ModelLoadError, _images_of, load_processor
from agent.policies.openai import p_yes_from_logprobs

MISSING = (
    "the vllm policy needs vLLM, which runs on GPU machines only: "
    "pip install -r requirements-gpu.txt (or use --policy hf / --policy openai)"
)


class VLLMPolicy:
    name = "vllm"

    def __init__(
        self,
        model: str,
        renderer: str = "speco3",
        max_new_tokens: int = 1024,
        temperature: float = 0.0,
        top_logprobs: int = 5,
        max_turns: int = 8,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int = 32768,
        dtype: str = "auto",
        seed: int = 0,
        engine: Any = None,
        sampling_params_cls: Any = None,
        **_: Any,
    ):
        self.model_id = str(model)
        self.renderer = renderer
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_logprobs = int(top_logprobs)
        self.seed = seed
        self.processor = load_processor(model)
        if engine is None or sampling_params_cls is None:
            try:
                import vllm
            except ImportError:
                raise ModelLoadError(MISSING) from None
            sampling_params_cls = sampling_params_cls or vllm.SamplingParams
            engine = engine or vllm.LLM(
                model=self.model_id,
                tensor_parallel_size=tensor_parallel_size,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                dtype=dtype,
                seed=seed,
                # one global view plus a zoom per turn
                limit_mm_per_prompt={"image": max_turns + 1},
            )
        self.engine = engine
        self._sampling_params_cls = sampling_params_cls

    def prompts(self, episodes: list[Episode]) -> list[dict[str, Any]]:
        """vLLM prompt dicts: chat-templated text and the episode's images, in order."""
        out = []
        for ep in episodes:
            text = self.processor.apply_chat_template(
                ep.messages, add_generation_prompt=True, tokenize=False
            )
            images = _images_of(ep.messages)
            prompt: dict[str, Any] = {"prompt": text}
            if images:
                prompt["multi_modal_data"] = {"image": images}
            out.append(prompt)
        return out

    def sampling_params(self) -> Any:
        return self._sampling_params_cls(
            temperature=self.temperature,
            max_tokens=self.max_new_tokens,
            logprobs=self.top_logprobs,
            seed=self.seed if self.temperature > 0 else None,
        )

    def act(self, episodes: list[Episode]) -> list[Reply]:
        if not episodes:
            return []
        try:
            outputs = self.engine.generate(
                self.prompts(episodes), self.sampling_params(), use_tqdm=False
            )
        except Exception as exc:  # engine failure: every episode of the batch records it
            msg = f"vllm generation failed: {type(exc).__name__}: {exc}"
            return [Reply(text="", error=msg) for _ in episodes]
        replies = []
        for out in outputs:
            try:
                comp = out.outputs[0]
                replies.append(Reply(text=comp.text, p_yes=_p_yes(comp)))
            except Exception as exc:
                replies.append(Reply(text="", error=f"vllm output unreadable: {exc}"))
        return replies


def _p_yes(completion: Any) -> float | None:
    """P(YES) from vLLM's per-token top-k logprobs ({token_id: Logprob}) at the verdict."""
    lps = getattr(completion, "logprobs", None)
    ids = list(getattr(completion, "token_ids", None) or [])
    if not lps or len(lps) != len(ids):
        return None
    content = []
    for tid, top in zip(ids, lps):
        chosen = top.get(tid)
        if chosen is None or chosen.decoded_token is None:
            return None
        content.append(
            {
                "token": chosen.decoded_token,
                "logprob": chosen.logprob,
                "top_logprobs": [
                    {"token": lp.decoded_token, "logprob": lp.logprob}
                    for lp in top.values()
                    if lp.decoded_token is not None
                ],
            }
        )
    # offsets come from the decoded tokens, which is exactly how vLLM built `text`
    text = "".join(c["token"] for c in content)
    return p_yes_from_logprobs(text, {"content": content})
