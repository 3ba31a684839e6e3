"""`hf`: a local Hugging Face checkpoint (Qwen2.5-VL family) plays the assistant.

Heavy imports (torch, transformers) happen inside, when the policy is built.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any


@functools.cache
def processor_class() -> type:
    """Qwen2.5-VL's processor without the video processor (which needs torchvision).

    Loupe sends only images; the stock class refuses to construct on machines without
    torchvision, this subclass works everywhere and behaves the same for images.
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
    tokenizer = AutoTokenizer.from_pretrained(path)
    image_processor = AutoImageProcessor.from_pretrained(path)
    template = getattr(tokenizer, "chat_template", None)
    return processor_class()(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=template
    )
