"""`hf`: a local Hugging Face checkpoint (Qwen2.5-VL family) plays the assistant.

Heavy imports (torch, transformers) happen inside, when the policy is built.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from agent.errors import LoupeError


class ModelLoadError(LoupeError):
    """A model the policy cannot load: a checkpoint that is neither a local folder nor
    reachable on the hub, or a backend (vLLM) that is not installed."""


# The video processor that goes with a stock Qwen-VL image processor: Qwen2.5-VL checkpoints
# ship one, and transformers builds no Qwen2.5-VL processor without it.
VIDEO_PROCESSOR = {
    "Qwen2VLImageProcessor": "Qwen2VLVideoProcessor",
    "Qwen2VLImageProcessorFast": "Qwen2VLVideoProcessor",
}
# What the video processor shares with the image processor: the vision tower's geometry and
# pixel scaling (its frame sizes and sampling keep the stock defaults; Loupe sends none).
_SHARED_WITH_VIDEO = ("patch_size", "temporal_patch_size", "merge_size", "image_mean",
                      "image_std", "do_convert_rgb", "do_normalize", "do_rescale",
                      "rescale_factor", "do_resize", "resample")  # fmt: skip


def name_stock_classes(folder: str | Path, stock: str = "Qwen2_5_VLProcessor") -> None:
    """Make a saved processor's files name the stock classes: `stock` in
    processor_config.json and tokenizer_config.json, and a video processor config beside
    the stock image processor's, as the published checkpoints have them."""
    import json

    out = Path(folder)
    path = out / "processor_config.json"
    cfg = json.loads(path.read_text())
    cfg["processor_class"] = stock
    image = cfg.get("image_processor") or {}
    video = VIDEO_PROCESSOR.get(image.get("image_processor_type", ""))
    if video and "video_processor" not in cfg:
        cfg["video_processor"] = {
            **{k: image[k] for k in _SHARED_WITH_VIDEO if k in image},
            "video_processor_type": video,
            "processor_class": stock,
        }
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tok_path = out / "tokenizer_config.json"
    if tok_path.is_file():
        tok = json.loads(tok_path.read_text())
        if "processor_class" in tok:
            tok["processor_class"] = stock
            tok_path.write_text(json.dumps(tok, indent=2, ensure_ascii=False) + "\n")


@functools.cache
def processor_class() -> type:
    """Qwen2.5-VL's processor without the video processor (which needs torchvision).

    Loupe sends only images; the stock class refuses to construct on machines without
    torchvision, this subclass works everywhere and behaves the same for images. It saves
    itself as the stock `Qwen2_5_VLProcessor` (`name_stock_classes`), so a checkpoint
    written with it (by a trainer's checkpoints too) opens in other tools.
    """
    from transformers import Qwen2_5_VLProcessor

    class QwenVLImageProcessor(Qwen2_5_VLProcessor):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            kwargs.pop("video_processor", None)
            self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
            self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            # Skip Qwen2_5_VLProcessor.__init__ (it requires a video processor).
            super(Qwen2_5_VLProcessor, self).__init__(
                image_processor, tokenizer, chat_template=chat_template
            )

        def save_pretrained(self, save_directory, *args, **kwargs):
            out = super().save_pretrained(save_directory, *args, **kwargs)
            name_stock_classes(save_directory, Qwen2_5_VLProcessor.__name__)
            return out

    return QwenVLImageProcessor


def load_processor(path: str | Path) -> Any:
    """The checkpoint's processor; built explicitly where AutoProcessor cannot build it."""
    from transformers import AutoImageProcessor, AutoProcessor, AutoTokenizer

    try:
        proc = AutoProcessor.from_pretrained(path)
        if hasattr(proc, "image_processor") and hasattr(proc, "tokenizer"):
            return proc
    except (ImportError, ValueError, OSError, TypeError, AttributeError):
        pass  # no torchvision (video processor) or a processor class we must build ourselves
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        image_processor = AutoImageProcessor.from_pretrained(path)
    except OSError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(
            f"--model {path}: cannot load this checkpoint ({first}); give the folder of a "
            "local Hugging Face checkpoint (config.json, tokenizer and weights)"
        ) from None
    template = getattr(tokenizer, "chat_template", None)
    return processor_class()(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=template
    )


def _images_of(messages: list[dict[str, Any]]) -> list[Any]:
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            out += [c["image"] for c in content if isinstance(c, dict) and c.get("type") == "image"]
    return out


def trained_renderer(model_dir: str) -> str:
    """The renderer a checkpoint was trained on: Loupe's training scripts record it in
    `loupe_training.json`; anything else (the published Spec-o3 weights) saw `speco3`."""
    import json
    from pathlib import Path

    meta = Path(model_dir) / "loupe_training.json"
    try:
        return str(json.loads(meta.read_text()).get("renderer") or "speco3")
    except (OSError, ValueError, AttributeError):
        return "speco3"


class HFPolicy:
    """A local checkpoint (`AutoModelForImageTextToText` + its processor) plays the agent.

    Episodes are generated together in batches of `batch_size` (left padding). Confidence
    is P(YES) at the boxed answer: the next-token distribution where the verdict was
    generated, normalised over the first tokens of YES and NO (case variants included).
    """

    name = "hf"

    def __init__(
        self,
        model: str,
        renderer: str | None = None,
        batch_size: int = 8,
        max_new_tokens: int = 1024,
        temperature: float = 0.0,
        device: str | None = None,
        dtype: str = "auto",
        seed: int = 0,
        **_: Any,
    ):
        import torch
        from transformers import AutoModelForImageTextToText

        self.model_id = str(model)
        self.renderer = renderer or trained_renderer(model)
        self.batch_size = max(1, int(batch_size))
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.processor = load_processor(model)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        torch_dtype = dtype
        if dtype == "auto" and self.device == "cpu":
            torch_dtype = torch.float32  # bf16 matmuls are slow or missing on many CPUs
        self.model = AutoModelForImageTextToText.from_pretrained(model, dtype=torch_dtype)
        self.model.to(self.device).eval()
        self._torch = torch
        self._generator_seed = seed
        self._verdict_ids = self._first_token_ids()

    def _first_token_ids(self) -> dict[str, set[int]]:
        ids: dict[str, set[int]] = {"YES": set(), "NO": set()}
        for key, variants in (("YES", ("YES", "Yes", "yes")), ("NO", ("NO", "No", "no"))):
            for v in variants:
                enc = self.tokenizer.encode(v, add_special_tokens=False)
                if enc:
                    ids[key].add(enc[0])
        return ids

    # -- the protocol ---------------------------------------------------------------
    def act(self, episodes: list) -> list:
        from agent.policies.base import Reply

        replies: list[Reply] = []
        for i in range(0, len(episodes), self.batch_size):
            chunk = episodes[i : i + self.batch_size]
            try:
                replies += self._generate(chunk)
            except Exception as exc:  # OOM, a bad image: the batch's episodes record it
                msg = f"hf generation failed: {type(exc).__name__}: {exc}"
                replies += [Reply(text="", error=msg) for _ in chunk]
        return replies

    def _generate(self, episodes: list) -> list:
        from agent.policies.base import Reply

        torch = self._torch
        texts = [
            self.processor.apply_chat_template(
                ep.messages, add_generation_prompt=True, tokenize=False
            )
            for ep in episodes
        ]
        images = [img for ep in episodes for img in _images_of(ep.messages)]
        inputs = self.processor(
            text=texts, images=images or None, padding=True, return_tensors="pt"
        ).to(self.device)
        sample = self.temperature > 0
        gen_kwargs: dict[str, Any] = dict(
            max_new_tokens=self.max_new_tokens,
            do_sample=sample,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        if sample:
            gen_kwargs["temperature"] = self.temperature
            torch.manual_seed(self._generator_seed)
        else:  # greedy: silence sampling defaults a checkpoint's generation_config may carry
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = self.model.generate(**inputs, **gen_kwargs)
        prompt_len = inputs["input_ids"].shape[1]
        new = out.sequences[:, prompt_len:]
        logits = torch.stack(out.logits, dim=1)  # (batch, new_tokens, vocab)
        replies = []
        for b in range(new.shape[0]):
            ids = _strip_after_eos(new[b].tolist(), self._stop_ids())
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            p_yes = self._p_yes(ids, text, logits[b])
            replies.append(Reply(text=text, p_yes=p_yes))
        return replies

    def _stop_ids(self) -> set[int]:
        stop = {self.tokenizer.pad_token_id, self.tokenizer.eos_token_id}
        eos = self.model.generation_config.eos_token_id
        stop |= set(eos if isinstance(eos, list) else [eos])
        return {s for s in stop if s is not None}

    def _p_yes(self, ids: list[int], text: str, logits: Any) -> float | None:
        """P(YES) at the token that starts the boxed verdict, or None if there is none."""
        from agent.confidence import verdict_char_index

        at = verdict_char_index(text)
        if at is None:
            return None
        pos = self._token_at_char(ids, at)
        if pos is None or pos >= logits.shape[0]:
            return None
        start = len(self.tokenizer.decode(ids[:pos], skip_special_tokens=True))
        prefix = text[start:at]
        yes_ids, no_ids = self._verdict_ids["YES"], self._verdict_ids["NO"]
        if prefix:  # the verdict shares its token with what precedes it (e.g. "{YES")
            yes_ids = self._prefixed_ids(prefix, ("YES", "Yes", "yes"))
            no_ids = self._prefixed_ids(prefix, ("NO", "No", "no"))
        probs = self._torch.softmax(logits[pos].float(), dim=-1)
        py = float(sum(probs[i] for i in yes_ids))
        pn = float(sum(probs[i] for i in no_ids - yes_ids))
        if py + pn <= 0.0:
            return None
        return py / (py + pn)

    def _prefixed_ids(self, prefix: str, variants: tuple[str, ...]) -> set[int]:
        out = set()
        for v in variants:
            enc = self.tokenizer.encode(prefix + v, add_special_tokens=False)
            if enc:
                out.add(enc[0])
        return out

    def _token_at_char(self, ids: list[int], char: int) -> int | None:
        """Index of the generated token whose text covers character `char` (binary search)."""
        lo, hi = 0, len(ids)
        while lo < hi:  # smallest k with len(decode(ids[:k+1])) > char
            mid = (lo + hi) // 2
            if len(self.tokenizer.decode(ids[: mid + 1], skip_special_tokens=True)) > char:
                hi = mid
            else:
                lo = mid + 1
        return lo if lo < len(ids) else None


def _strip_after_eos(ids: list[int], stop: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in stop:
            return ids[:i]
    return ids
