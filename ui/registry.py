"""The pages of the app, in teaching order. The router and the home page's map read this."""
from __future__ import annotations

import pathlib
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PageSpec:
    key: str        # url path and i18n key: nav.<key>, nav.<key>_blurb
    section: str    # i18n key nav.section_<section>
    icon: str

    @property
    def path(self) -> str:
        """Relative to the repository root (what AppTest.switch_page takes)."""
        return f"pages/{self.key}.py"

    @property
    def file(self) -> pathlib.Path:
        """Absolute, so the app also runs from another entry point (cloud/streamlit_app.py)."""
        return ROOT / self.path


SECTIONS = ("start", "foundations", "transformer", "efficiency", "modern", "learned", "review")

PAGES: tuple[PageSpec, ...] = (
    PageSpec("home", "start", ":material/home:"),
    PageSpec("qkv", "foundations", ":material/key:"),
    PageSpec("scaling", "foundations", ":material/thermostat:"),
    PageSpec("masking", "foundations", ":material/visibility_off:"),
    PageSpec("multihead", "transformer", ":material/view_module:"),
    PageSpec("positional", "transformer", ":material/pin_drop:"),
    PageSpec("encoder", "transformer", ":material/layers:"),
    PageSpec("cross_attention", "transformer", ":material/compare_arrows:"),
    PageSpec("efficiency", "efficiency", ":material/speed:"),
    PageSpec("kv_cache", "modern", ":material/memory:"),
    PageSpec("gqa", "modern", ":material/call_split:"),
    PageSpec("attention_sinks", "modern", ":material/anchor:"),
    PageSpec("long_context", "modern", ":material/straighten:"),
    PageSpec("qk_norm", "modern", ":material/compress:"),
    PageSpec("induction_heads", "modern", ":material/repeat:"),
    PageSpec("bottleneck", "learned", ":material/filter_alt:"),
    PageSpec("alignment", "learned", ":material/translate:"),
    PageSpec("pronoun", "learned", ":material/psychology:"),
    PageSpec("analysis", "learned", ":material/analytics:"),
    PageSpec("training", "learned", ":material/model_training:"),
    PageSpec("glossary", "start", ":material/menu_book:"),     # last in the list, shown under Start
    PageSpec("summary", "review", ":material/summarize:"),
)


def available_pages() -> list[PageSpec]:
    """Only pages whose file exists are registered: the app never links to a stub."""
    return [p for p in PAGES if p.file.exists()]
