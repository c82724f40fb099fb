"""LSTM Seq2Seq with and without Bahdanau attention: masks, shapes, padding invariance, oracles."""
import random

import pytest
import torch
import torch.nn.functional as F

from attention_core.models.seq2seq import (
    Seq2Seq,
    Seq2SeqConfig,
    encode_sources,
    make_seq2seq_batch,
    seq2seq_loss,
    translate,
)
from attention_core.models.tasks import REVERSE_VOCAB, make_reverse_example

V = REVERSE_VOCAB


def model(attention: bool, seed: int = 0) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(Seq2SeqConfig(len(V), len(V), embed_dim=8, hidden_dim=16, attention=attention,
                                 attn_dim=12)).eval()


def batch(lengths=(3, 7, 5, 1), seed=0):
    rng = random.Random(seed)
    return make_seq2seq_batch([make_reverse_example(rng, n) for n in lengths], V, V)


@pytest.mark.parametrize("attention", [True, False])
def test_shapes(attention):
    m, b = model(attention), batch()
    out = m(b.src, b.src_lengths, b.tgt_in)
    assert out.logits.shape == (4, 8, len(V))
    if attention:
        assert out.weights.shape == (4, 8, 7)
    else:
        assert out.weights is None


def test_padded_positions_get_exactly_zero_attention_and_rows_sum_to_one():
    m, b = model(True), batch()
    w = m(b.src, b.src_lengths, b.tgt_in).weights                  # (b, T, n)
    pad = torch.arange(7)[None, None, :] >= b.src_lengths[:, None, None]
    assert (w[pad.expand_as(w)] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 8), atol=1e-6, rtol=0)
    g = m.greedy_decode(b.src, b.src_lengths, max_len=9).weights
    assert (g.masked_select(pad.expand_as(g)) == 0).all()


@pytest.mark.parametrize("attention", [True, False])
def test_a_sequence_gives_the_same_output_alone_and_inside_a_padded_batch(attention):
    m, b = model(attention), batch()
    full = m(b.src, b.src_lengths, b.tgt_in)
    for i, n in enumerate(b.src_lengths.tolist()):
        t = int((b.tgt_out[i] != 0).sum())
        alone = m(b.src[i:i + 1, :n], b.src_lengths[i:i + 1], b.tgt_in[i:i + 1, :t])
        torch.testing.assert_close(full.logits[i, :t], alone.logits[0], atol=1e-5, rtol=1e-5)
        if attention:
            torch.testing.assert_close(full.weights[i, :t, :n], alone.weights[0], atol=1e-6, rtol=1e-5)


def test_encoder_final_state_is_that_of_the_last_real_character():
    m, b = model(False), batch()
    _, (h, c) = m.encoder(b.src, b.src_lengths)
    for i, n in enumerate(b.src_lengths.tolist()):
        _, (h1, c1) = m.encoder.lstm(m.encoder.embedding(b.src[i:i + 1, :n]))   # direct, no padding
        torch.testing.assert_close(h[:, i], h1[:, 0], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(c[:, i], c1[:, 0], atol=1e-6, rtol=1e-5)


def test_cached_keys_equal_the_additive_attention_module():
    m, b = model(True), batch()
    enc, (h, _) = m.encoder(b.src, b.src_lengths)
    mask = torch.arange(7)[None, :] < b.src_lengths[:, None]
    ctx, w = m.decoder.attend(h[0], enc, mask, m.decoder.project_keys(enc))
    ctx_ref, w_ref = m.decoder.attention(h[0], enc, enc, mask)          # AdditiveAttention itself
    torch.testing.assert_close(w, w_ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ctx, ctx_ref, atol=1e-6, rtol=1e-5)
    # and an explicit v^T tanh(W_q q + W_k k) for one query / key
    a = m.decoder.attention
    s = a.v(torch.tanh(a.W_query(h[0, 1]) + a.W_key(enc[1, 2])))
    s_all = a.v(torch.tanh(a.W_query(h[0, 1]) + a.W_key(enc[1, :7])))[:, 0]
    torch.testing.assert_close(w[1, 2], torch.softmax(s_all, 0)[2], atol=1e-6, rtol=1e-5)
    assert s.shape == (1,)


@pytest.mark.parametrize("attention", [True, False])
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(attention):
    m, b = model(attention, seed=3), batch()
    toks, w = m.greedy_decode(b.src, b.src_lengths, max_len=10)
    sos = torch.full((4, 1), V.sos_id)
    out = m(b.src, b.src_lengths, torch.cat([sos, toks[:, :-1].clamp_min(0)], 1))
    for i in range(4):
        steps = toks[i].tolist()
        end = steps.index(V.eos_id) + 1 if V.eos_id in steps else len(steps)
        assert out.logits[i, :end].argmax(-1).tolist() == steps[:end]
        assert all(t == V.pad_id for t in steps[end:])
        if attention:
            torch.testing.assert_close(w[i, :end], out.weights[i, :end], atol=1e-6, rtol=1e-5)
            assert (w[i, end:] == 0).all()


def test_plain_decoder_one_call_equals_step_by_step():
    m, b = model(False), batch()
    _, state = m.encoder(b.src, b.src_lengths)
    logits, _ = m.decoder(b.tgt_in, state)
    s = state
    for t in range(b.tgt_in.size(1)):
        lt, s = m.decoder.step(b.tgt_in[:, t], s)
        torch.testing.assert_close(lt, logits[:, t], atol=1e-6, rtol=1e-5)


def test_loss_ignores_padded_targets():
    m, b = model(True), batch()
    logits = m(b.src, b.src_lengths, b.tgt_in).logits
    real = b.tgt_out != V.pad_id
    manual = -(F.log_softmax(logits, -1).gather(-1, b.tgt_out.unsqueeze(-1)).squeeze(-1)[real]).mean()
    torch.testing.assert_close(seq2seq_loss(m, b), manual, atol=1e-6, rtol=1e-5)


def test_translate_returns_an_alignment_per_output_character():
    m = model(True, seed=1)
    outs = translate(m, ["12345", "9"], V, V, max_len=8)
    for o, src in zip(outs, ["12345", "9"]):
        assert o.source == src
        assert o.alignment.shape == (len(o.output), len(src))
        if len(o.output):
            torch.testing.assert_close(o.alignment.sum(-1), torch.ones(len(o.output)), atol=1e-6, rtol=0)
    assert translate(model(False), ["123"], V, V, max_len=4)[0].alignment is None
    with pytest.raises(ValueError):
        encode_sources(["12", ""], V)
