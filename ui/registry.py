"""The pages of the app, in teaching order (the router and the home page's map read this). The one-time import of
every module they use is serving.preload's."""
from __future__ import annotations

import pathlib
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PageSpec:
    key: str        # url path and i18n key: nav.<key>, nav.<key>_blurb
    section: str    # i18n key nav.section_<section>
    icon: str
    core: bool = True   # on the core path (home's "start here" and the course line); False: optional, beside it
    minutes: int = 10   # an estimate of the time a learner needs for the page, exercise and pitfall included

    @property
    def path(self) -> str:
        """Relative to the repository root (what AppTest.switch_page takes)."""
        return f"app_pages/{self.key}.py"

    @property
    def file(self) -> pathlib.Path:
        """Absolute, so the app also runs from another entry point (cloud/streamlit_app.py)."""
        return ROOT / self.path


SECTIONS = ("start", "why", "foundations", "transformer", "learned", "efficiency", "modern", "review", "teach")

# The order of the tutorials' narrative: why attention (the fixed vector of Seq2Seq is a bottleneck, and additive
# attention its fix), then Q, K, V with their scaling and masks, the Transformer's parts, what trained models learn,
# efficient attention, today's LLMs (each of those pages leans on the KV cache or RoPE seen before it), the review.
# The navigation, the home page's map and the pages' previous / next links all follow it, section by section.
PAGES: tuple[PageSpec, ...] = (
    PageSpec("home", "start", ":material/home:", minutes=3),
    PageSpec("bottleneck", "why", ":material/filter_alt:", minutes=10),
    PageSpec("alignment", "why", ":material/translate:", minutes=12),
    PageSpec("qkv", "foundations", ":material/key:", minutes=15),
    PageSpec("scaling", "foundations", ":material/thermostat:", minutes=12),
    PageSpec("masking", "foundations", ":material/visibility_off:", minutes=12),
    PageSpec("multihead", "transformer", ":material/view_module:", minutes=12),
    PageSpec("positional", "transformer", ":material/pin_drop:", minutes=12),
    PageSpec("encoder", "transformer", ":material/layers:", minutes=12),
    PageSpec("cross_attention", "transformer", ":material/compare_arrows:", core=False, minutes=12),
    PageSpec("pronoun", "learned", ":material/psychology:", minutes=10),
    PageSpec("analysis", "learned", ":material/analytics:", core=False, minutes=10),
    PageSpec("pretrained", "learned", ":material/neurology:", core=False, minutes=12),
    PageSpec("training", "learned", ":material/model_training:", core=False, minutes=15),
    PageSpec("efficiency", "efficiency", ":material/speed:", minutes=15),
    PageSpec("kv_cache", "modern", ":material/memory:", minutes=12),
    PageSpec("gqa", "modern", ":material/call_split:", core=False, minutes=12),
    PageSpec("attention_sinks", "modern", ":material/anchor:", core=False, minutes=12),
    PageSpec("long_context", "modern", ":material/straighten:", core=False, minutes=12),
    PageSpec("qk_norm", "modern", ":material/compress:", core=False, minutes=12),
    PageSpec("induction_heads", "modern", ":material/repeat:", core=False, minutes=15),
    PageSpec("summary", "review", ":material/summarize:", minutes=10),
    PageSpec("glossary", "review", ":material/menu_book:", core=False, minutes=5),
    PageSpec("teach", "teach", ":material/school:", core=False, minutes=5),
    PageSpec("poll", "teach", ":material/how_to_vote:", core=False, minutes=5),   # students join a room here
)


def spec_of(key: str) -> PageSpec | None:
    """The registered page ``key`` (None for an unknown key)."""
    return next((p for p in PAGES if p.key == key), None)


def available_pages() -> list[PageSpec]:
    """Only pages whose file exists are registered: the app never links to a stub."""
    return [p for p in PAGES if p.file.exists()]
