"""Oracles for the labs of the tutorials' content: performance tips (labs.efficiency)."""
import math

import pytest
import torch
import torch.nn.functional as TF

from attention_core.labs import efficiency as el


# ------------------------------------------------------------------ saved-tensor bytes
def test_saved_tensor_bytes_counts_distinct_storages_by_hand():
    a = torch.randn(1000, requires_grad=True)
    b = torch.randn(1000, requires_grad=True)
    # a * b saves a and b (for each other's gradient): two float32 storages of 1000 numbers
    _, saved = el.saved_tensor_bytes(lambda: (a * b).sum())
    assert saved == el.SavedTensors(8000, 2)
    # a * a saves a twice: one storage, two save events
    _, saved = el.saved_tensor_bytes(lambda: (a * a).sum())
    assert saved == el.SavedTensors(4000, 2)
    # nothing requires grad: nothing is saved
    with torch.no_grad():
        _, saved = el.saved_tensor_bytes(lambda: (a * b).sum())
    assert saved == el.SavedTensors(0, 0)


@pytest.mark.parametrize("n,layers", [(16, 1), (32, 3)])
def test_checkpointing_keeps_only_layer_inputs_and_is_exact(n, layers):
    d = 64
    r = el.checkpoint_report(n, layers, d_model=d)
    assert r.ckpt_bytes == layers * n * d * 4          # one float32 (1, n, d) input per layer
    assert r.ckpt_count == layers
    assert r.plain_bytes == layers * r.layer_bytes      # identical layers save the same
    assert r.plain_bytes > 20 * r.ckpt_bytes
    assert (r.plain_forwards, r.ckpt_forwards) == (layers, 2 * layers)   # recomputed once in backward
    assert r.grad_max_diff < 1e-6


def test_checkpoint_ratio_does_not_depend_on_depth_and_bf16_saves_less():
    one, four = el.checkpoint_report(32, 1), el.checkpoint_report(32, 4)
    assert one.plain_bytes / one.ckpt_bytes == pytest.approx(four.plain_bytes / four.ckpt_bytes)
    mixed = el.checkpoint_report(32, 4, autocast=True)
    assert mixed.plain_bytes < 0.7 * four.plain_bytes   # bf16 activations: about half the bytes
    assert mixed.ckpt_bytes == four.ckpt_bytes          # post-LN layer outputs stay float32
    assert mixed.grad_max_diff < 1e-6


@pytest.mark.parametrize("autocast", [False, True])
def test_the_written_out_checkpoint_matches_torchs(autocast):
    """``efficiency.checkpoint`` against its oracle, torch's non-reentrant ``torch.utils.checkpoint``: the same
    bytes and save events kept for backward, the same number of layer forwards, the same gradients (of the input
    and of every parameter), in float32 and under bfloat16 autocast."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    model = el.make_encoder(3)
    tokens = torch.randint(0, el.VOCAB, (2, 24), generator=torch.Generator().manual_seed(1))
    calls = [0]
    for layer in model.layers:
        layer.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))

    def run(wrap):
        model.zero_grad(set_to_none=True)
        calls[0] = 0
        x = model.embed(tokens).detach().requires_grad_(True)

        def forward():
            h = model._prepare(x)
            for layer in model.layers:
                h = wrap(lambda z, layer=layer: layer(z).output, h)
            return h
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, saved = el.saved_tensor_bytes(forward)
        (out.float() * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        return saved, calls[0], [x.grad] + [p.grad for p in model.parameters() if p.grad is not None]

    ours = run(el.checkpoint)
    theirs = run(lambda f, h: torch_checkpoint(f, h, use_reentrant=False))
    assert ours[:2] == theirs[:2] == (el.SavedTensors(3 * 2 * 24 * 64 * 4, 3), 6)
    assert len(ours[2]) == len(theirs[2]) > 10
    for a, b in zip(ours[2], theirs[2]):
        assert torch.equal(a, b)


def test_the_checkpointing_tip_does_not_import_torchs_compiler():
    """torch's non-reentrant checkpoint imports torch._dynamo (about 70 MB of a server's memory, held from then
    on): the efficiency page's checkpointing tip, at its largest inputs and in bfloat16, runs the written-out one."""
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    from scripts.bench_memory import tab_labels
    query = {"tab": tab_labels(root)["efficiency"]["tips"], "ck_n": "64", "ck_L": "4", "ck_bf16": "true"}
    code = ("import sys; from streamlit.testing.v1 import AppTest; at = AppTest.from_file('app.py', "
            f"default_timeout=60); at.query_params.update({query!r}); at.switch_page('app_pages/efficiency.py'); "
            "at.run(); assert not at.exception, at.exception; "
            "print('torch._dynamo' in sys.modules, sum(m.value.endswith('iB') for m in at.metric))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    dynamo, metrics = out.stdout.split()
    assert int(metrics) >= 2, "the checkpointing tip's measurements were not drawn: the check proves nothing"
    assert dynamo == "False"


# ------------------------------------------------------------------ mixed precision
def test_attention_in_matches_torch_sdpa_per_dtype():
    q, k, v = el.precision_inputs(24, 16, 1.0, 3)
    for recipe, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        out, w = el.attention_in(q, k, v, recipe)
        assert out.dtype == torch.float64
        ref = TF.scaled_dot_product_attention(q.to(dtype).float(), k.to(dtype).float(), v.to(dtype).float())
        # float32 exactly like torch; 16-bit recipes within a few of their epsilons of torch in float32
        tol = 1e-6 if recipe == "float32" else 20 * torch.finfo(dtype).eps
        assert float((out - ref.double()).abs().max()) < tol
        assert torch.allclose(w.sum(-1), torch.ones(1, 1, 24, dtype=torch.float64), atol=40 * torch.finfo(dtype).eps)
    out, _ = el.attention_in(q, k, v, "bf16_inputs")
    rounded = [x.to(torch.bfloat16).double() for x in (q, k, v)]
    ref = TF.scaled_dot_product_attention(*rounded)     # float64 on the rounded inputs
    assert float((out - ref).abs().max()) < 1e-5


def test_precision_table_against_float64_oracle():
    rows = {r.recipe: r for r in el.precision_table(64, 32, 1.0, 0)}
    assert rows["float32"].output_error < 1e-5
    assert rows["bfloat16"].eps == 2 ** -7 and rows["float16"].eps == 2 ** -10
    assert rows["float16"].max_value == 65504.0 and rows["bfloat16"].max_value > 3e38
    assert [rows[r].bytes_per_number for r in el.RECIPES] == [4, 2, 2, 2]
    # the order the exercise teaches, on every seed and sharpness the page offers
    for gain in (0.5, 1.0, 2.0, 4.0, 8.0):
        for seed in range(4):
            e = {r.recipe: r.output_error for r in el.precision_table(64, 32, gain, seed)}
            assert e["bfloat16"] > e["bf16_inputs"] > e["float32"]
            assert e["bfloat16"] > e["float16"] > e["float32"]
    # the error grows with the scores: sharper attention, larger bf16 error
    errs = [{r.recipe: r.output_error for r in el.precision_table(64, 32, g, 0)}["bfloat16"] for g in (0.5, 8.0)]
    assert errs[1] > 10 * errs[0]
    q, k, _ = el.precision_inputs(64, 32, 2.0, 0)
    assert el.largest_score(64, 32, 2.0, 0) == pytest.approx(float((q @ k.mT).abs().max()) / math.sqrt(32))


# ------------------------------------------------------------------ the tutorials' bugs, reproduced (seed_bugs)
from attention_core.efficient import linear_attention  # noqa: E402
from attention_core.functional import scaled_dot_product_attention  # noqa: E402
from attention_core.labs import seed_bugs as sb  # noqa: E402
from attention_core.masks import causal_mask, padding_mask  # noqa: E402
from attention_core.modules import AdditiveAttention  # noqa: E402


def test_tutorial_additive_scores_are_the_diagonal_of_the_full_matrix():
    torch.manual_seed(1)
    module = AdditiveAttention(6, 6, 5)
    q, k = torch.randn(1, 4, 6), torch.randn(1, 4, 6)
    with torch.no_grad():
        theirs = sb.tutorial_additive_scores(module, q, k)
        full = torch.tensor([[float(module.v.weight[0] @ torch.tanh(module.W_query.weight @ q[0, i]
                                                                     + module.W_key.weight @ k[0, j]))
                              for j in range(4)] for i in range(4)])        # every pair, by hand
    assert theirs.shape == (1, 4)
    assert torch.allclose(theirs[0], torch.diagonal(full), atol=1e-6)
    assert torch.allclose(module.scores(q, k)[0], full, atol=1e-6)
    r = sb.additive_pairing_demo(module, q, k)
    assert r.theirs_shape == (1, 4) and r.ours_shape == (1, 4, 4) and r.off_diag == 12
    assert r.diag_diff < 1e-6 and "must match" in r.fewer_queries_error


def test_tutorial_linear_attention_ignores_its_mask_and_is_never_causal():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 9, 8, generator=g)
    theirs = sb.tutorial_linear_attention(x, x, x, 2, mask=causal_mask(9))
    assert torch.equal(theirs, sb.tutorial_linear_attention(x, x, x, 2))        # the mask changes nothing
    heads = x.view(1, 9, 2, 4).transpose(1, 2)
    full = linear_attention(heads, heads, heads, causal=False).output.transpose(1, 2).reshape(1, 9, 8)
    assert torch.allclose(theirs, full, atol=1e-5)                               # = non-causal linear attention
    r = sb.linear_mask_demo(x)
    assert r.theirs_first > 1e-2 and r.ours_first == 0.0 and r.ours_all == 0.0
    assert "invalid for input of size" in r.cross_error


def test_tutorial_block_mask_fails_unless_there_is_one_block():
    for n, block in ((12, 4), (10, 4), (9, 2)):
        r = sb.block_mask_demo(n, block)
        assert "must match" in r["padding"] and "must match" in r["causal"]
    assert sb.block_mask_demo(8, 8) == {"padding": None, "causal": None}
    # one block: the whole mask fits, and the result is masked attention (-1e9 instead of -inf)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 6, 4, generator=g) for _ in range(3))
    mask = padding_mask(torch.tensor([4]), 6)
    out = sb.tutorial_block_local_attention(q, k, v, 6, mask.int())
    assert torch.allclose(out, scaled_dot_product_attention(q, k, v, mask).output, atol=1e-6)


def test_loss_on_raw_encoder_states_raises_and_a_head_fixes_it():
    r = sb.tutorial_loss_on_encoder_states(batch=2, n=10, d_model=64, vocab=100)
    assert r.error == "RuntimeError: Expected target size [2, 64], got [2, 10]"
    assert abs(r.fixed_loss - math.log(100)) < 0.5


@pytest.mark.parametrize("grad", [0.0, 1.0, 100.0])
def test_adamw_decay_matches_the_decoupled_recurrence(grad):
    lr, wd, steps = 1e-3, 0.01, 100
    # constant gradient: Adam's bias-corrected step is g / (|g| + eps) each time, the same with or without decay
    s = grad / (abs(grad) + 1e-9) if grad else 0.0
    w_decay = 1.0
    for _ in range(steps):
        w_decay = w_decay * (1 - lr * wd) - lr * s
    expected = (1.0 - lr * steps * s) - w_decay
    assert sb.weight_decay_effect("adamw", grad) == pytest.approx(expected, rel=1e-6)


def test_adam_l2_decay_depends_on_the_gradient_scale():
    adamw = sb.weight_decay_effect("adamw", 1.0)
    assert sb.weight_decay_effect("adam", 0.0) > 50 * adamw        # no gradient: a full lr step each time
    assert abs(sb.weight_decay_effect("adam", 100.0)) < adamw / 1000   # large gradient: swallowed


# ------------------------------------------------------------------ path lengths (Transformer paper, Table 1)
from attention_core.labs import cross_attention as cl  # noqa: E402


@pytest.mark.parametrize("n,kernel,r", [(1, 3, 1), (7, 3, 2), (16, 5, 4), (33, 7, 8)])
def test_path_lengths_match_the_closed_form_for_every_pair(n, kernel, r):
    for kind in cl.KINDS:
        lengths = cl.path_lengths(cl.layer_connections(n, kind, kernel=kernel, neighbourhood=r))
        expected = torch.tensor([[cl.closed_form_steps(abs(i - j), kind, kernel=kernel, neighbourhood=r)
                                  for j in range(n)] for i in range(n)])
        assert torch.equal(lengths, expected), kind


def test_path_lengths_of_a_disconnected_graph_and_table1():
    lengths = cl.path_lengths(torch.eye(4, dtype=torch.bool))          # no layer connects anything
    assert torch.equal(lengths, torch.where(torch.eye(4, dtype=torch.bool), 0, -1))
    rows = {row.kind: row for row in cl.table1(32, 64, 0, 31, kernel=3, neighbourhood=4)}
    assert rows["self_attention"] == (("self_attention", 32 * 32 * 64, 1, 1, 1))
    assert rows["recurrent"] == ("recurrent", 32 * 64 * 64, 32, 31, 31)
    assert rows["convolution"] == ("convolution", 3 * 32 * 64 * 64, 1, 31, 31)
    assert rows["restricted"] == ("restricted", 4 * 32 * 64, 1, 8, 8)
    with pytest.raises(ValueError):
        cl.layer_connections(4, "convolution", kernel=1)


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
@pytest.mark.parametrize("grad", [0.0, 0.01, 1.0, 100.0, -3.0])
def test_the_written_out_update_rules_match_torch_optim(optimizer, grad):
    """The lab writes Adam's and AdamW's updates out; torch.optim is the oracle (same betas, eps, lr, decay)."""
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer]
    final = []
    for wd in (0.0, 0.01):
        w = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
        opt = cls([w], lr=1e-3, betas=(0.9, 0.98), eps=1e-9, weight_decay=wd)
        for _ in range(100):
            opt.zero_grad()
            w.grad = torch.tensor([grad], dtype=torch.float64)
            opt.step()
        final.append(float(w.detach()))
    assert sb.weight_decay_effect(optimizer, grad) == pytest.approx(final[0] - final[1], rel=1e-9, abs=1e-15)
    with pytest.raises(ValueError):
        sb.weight_decay_effect("sgd", grad)


def test_the_training_page_at_its_defaults_does_not_import_torchs_compiler():
    """Building a torch optimizer imports torch._dynamo (about 70 MB of a server's memory, from the first
    session on): the training page at its defaults, its pitfalls' demos drawn, builds none. (The efficiency
    page's checkpointing tip still imports it: torch's non-reentrant checkpoint reads the compiler's config.)"""
    import pathlib
    import subprocess
    import sys
    code = ("import sys; from streamlit.testing.v1 import AppTest; at = AppTest.from_file('app.py', "
            "default_timeout=60); at.switch_page('app_pages/training.py'); at.run(); "
            "assert not at.exception, at.exception; "
            "print('torch._dynamo' in sys.modules, len(at.get('table')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=pathlib.Path(__file__).resolve().parent.parent)
    dynamo, tables = out.stdout.split()
    assert int(tables) >= 1, "the decay pitfall's table was not drawn: the check proves nothing"
    assert dynamo == "False"
