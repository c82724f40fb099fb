"""Labs: the computations of one page each, over the library (``attention_core``) and the models
(``attention_core.models``).

One module per page key of ``ui/registry.py`` (``labs.qkv`` is the ``qkv`` page's, as are
``app_pages/qkv.py`` and ``ui/qkv_charts.py``), plus ``seed_bugs`` (the tutorials' bugs, run, for
several pages) and ``efficiency_bench`` (the benchmark CLI the efficiency page's recorded figures come
from: ``python -m attention_core.labs.efficiency_bench``). A lab takes plain values and returns
plain values or tensors; it imports no streamlit, altair, pandas or ui, and parses no widget or URL
state (that lives in ``ui``).
"""

import contextlib

import torch


@contextlib.contextmanager
def seeded(seed: int):
    """``torch.manual_seed(seed)`` for the block, with the caller's random state restored after it. CPU only:
    ``torch.manual_seed`` also queues a CUDA seeding with a captured stack trace when CUDA is not initialised,
    about 1-3 ms per call from a Streamlit script's deep stack, paid again on every rerun that seeds."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(int(seed))
        yield
