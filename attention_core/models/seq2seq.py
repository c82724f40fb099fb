"""LSTM Seq2Seq without and with Bahdanau (additive) attention.

The first tutorial's ``Encoder`` / ``Decoder`` (section 2.1) and its motivation (1.2, 2.2: a fixed
context vector is an information bottleneck), with Bahdanau, Cho and Bengio (2015), "Neural Machine
Translation by Jointly Learning to Align and Translate", for the attention decoder, whose score is the
tutorial's ``AdditiveAttention`` (section 4.1, ``attention_core.modules.AdditiveAttention``).

Fixes to the tutorial's code:
- batches of different lengths: the encoder packs the padded batch, so its final state is that of
  each sequence's last real character, not of the padding after it (the tutorial feeds the pads
  through the LSTM and hands their state to the decoder);
- padded source positions get exactly 0 attention (boolean mask, ``masked_softmax``);
- teacher forcing runs the plain decoder over the whole target in one LSTM call, and greedy decoding
  stops each sequence at its own <eos>.

Shapes: src (b, n) ids, src_lengths (b,), tgt_in (b, T) = <sos> y_1 .. y_{T-1}; hidden size H.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..functional import masked_softmax
from ..masks import padding_mask
from ..modules import AdditiveAttention
from .tasks import Vocab

State = tuple[torch.Tensor, torch.Tensor]  # LSTM (h, c), each (1, b, H)


@dataclass
class Seq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    embed_dim: int = 32
    hidden_dim: int = 128
    attention: bool = True
    attn_dim: int = 64   # hidden size of the additive score v^T tanh(W_q q + W_k k)

    def to_dict(self) -> dict:
        return asdict(self)


class Encoder(nn.Module):
    """Embedding -> LSTM over the source. Returns every position's state (the keys and values of
    attention) and the final (h, c): the context vector that the plain decoder starts from."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, State]:
        emb = self.embedding(src)                                          # (b, n, E)
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = self.lstm(packed)                                    # h, c: (1, b, H) at last real step
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # (b, n, H), 0 at pads
        return out, (h, c)


class Decoder(nn.Module):
    """The tutorial's plain decoder: it sees the source only through the initial state (h, c)."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, vocab_size)

    def forward(self, tgt_in: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Teacher forcing: tgt_in (b, T) -> logits (b, T, V), in one LSTM call."""
        out, state = self.lstm(self.embedding(tgt_in), state)             # (b, T, H)
        return self.fc(out), state

    def step(self, y_prev: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """One step: y_prev (b,) -> logits (b, V)."""
        logits, state = self(y_prev.unsqueeze(1), state)
        return logits.squeeze(1), state


class AttentionDecoder(nn.Module):
    """Bahdanau decoder. At step t, with previous state s_{t-1}:
        c_t = sum_j a_tj h_j,  a_t = softmax_j(v^T tanh(W_q s_{t-1} + W_k h_j))   (padded j: a_tj = 0)
        s_t = LSTM([emb(y_{t-1}); c_t], s_{t-1});   logits_t = W_o [s_t; c_t]
    so every output character can look back at every input character."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_dim: int, enc_dim: int, attn_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.attention = AdditiveAttention(hidden_dim, enc_dim, attn_dim)
        self.cell = nn.LSTMCell(embed_dim + enc_dim, hidden_dim)
        self.fc = nn.Linear(hidden_dim + enc_dim, vocab_size)

    def project_keys(self, enc_out: torch.Tensor) -> torch.Tensor:
        """W_k h_j for every source position, (b, n, attn_dim): computed once per sentence."""
        return self.attention.W_key(enc_out)

    def attend(self, h: torch.Tensor, enc_out: torch.Tensor, src_mask: torch.Tensor,
               keys_proj: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """h (b, H) -> context (b, H_enc), weights (b, n).

        Equal to ``self.attention(h, enc_out, enc_out, src_mask)`` (the module's own weights and
        ``masked_softmax``), but reuses ``keys_proj = W_k h_j`` across the decoding steps instead of
        recomputing it at each of them (the projection dominates the cost of a step).
        """
        if keys_proj is None:
            return self.attention(h, enc_out, enc_out, src_mask)
        att = self.attention
        scores = att.v(torch.tanh(att.W_query(h).unsqueeze(1) + keys_proj)).squeeze(-1)  # (b, n)
        weights = masked_softmax(scores, src_mask)                                        # (b, n)
        return (weights.unsqueeze(1) @ enc_out).squeeze(1), weights

    def step(self, y_prev: torch.Tensor, state: State, enc_out: torch.Tensor, src_mask: torch.Tensor,
             keys_proj: torch.Tensor | None = None) -> tuple[torch.Tensor, State, torch.Tensor]:
        """y_prev (b,), state (1, b, H) x 2, enc_out (b, n, H_enc), src_mask (b, n) True = real char
        -> logits (b, V), new state, attention weights (b, n)."""
        h, c = state[0].squeeze(0), state[1].squeeze(0)                   # (b, H)
        context, weights = self.attend(h, enc_out, src_mask, keys_proj)   # (b, H_enc), (b, n)
        h, c = self.cell(torch.cat([self.embedding(y_prev), context], dim=-1), (h, c))
        logits = self.fc(torch.cat([h, context], dim=-1))                 # (b, V)
        return logits, (h.unsqueeze(0), c.unsqueeze(0)), weights

    def forward(self, tgt_in: torch.Tensor, state: State, enc_out: torch.Tensor,
                src_mask: torch.Tensor) -> tuple[torch.Tensor, State, torch.Tensor]:
        """Teacher forcing: tgt_in (b, T) -> logits (b, T, V), state, weights (b, T, n)."""
        keys_proj = self.project_keys(enc_out)
        logits, weights = [], []
        for t in range(tgt_in.size(1)):
            lt, state, wt = self.step(tgt_in[:, t], state, enc_out, src_mask, keys_proj)
            logits.append(lt)
            weights.append(wt)
        return torch.stack(logits, 1), state, torch.stack(weights, 1)


class Seq2SeqOutput(NamedTuple):
    logits: torch.Tensor             # (b, T, V)
    weights: torch.Tensor | None     # (b, T, n) alignment, None without attention


class GreedyOutput(NamedTuple):
    tokens: torch.Tensor             # (b, T) ids, <eos> included, <pad> after it
    weights: torch.Tensor | None     # (b, T, n), zero rows after <eos>


class Seq2Seq(nn.Module):
    """Encoder + (attention) decoder. ``attention=False`` is the tutorial's bottlenecked model."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = config
        H = config.hidden_dim
        self.encoder = Encoder(config.src_vocab_size, config.embed_dim, H)
        if config.attention:
            self.decoder = AttentionDecoder(config.tgt_vocab_size, config.embed_dim, H, H, config.attn_dim)
        else:
            self.decoder = Decoder(config.tgt_vocab_size, config.embed_dim, H)

    @property
    def attention(self) -> bool:
        return self.config.attention

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> Seq2SeqOutput:
        enc_out, state = self.encoder(src, src_lengths)
        if not self.attention:
            logits, _ = self.decoder(tgt_in, state)
            return Seq2SeqOutput(logits, None)
        mask = padding_mask(src_lengths, src.size(1), device=src.device)[:, 0, 0, :]  # (b, n)
        logits, _, weights = self.decoder(tgt_in, state, enc_out, mask)
        return Seq2SeqOutput(logits, weights)

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, src_lengths: torch.Tensor, max_len: int,
                      sos_id: int = Vocab.sos_id, eos_id: int = Vocab.eos_id,
                      pad_id: int = Vocab.pad_id) -> GreedyOutput:
        """Feed back the most likely token until every sequence has produced <eos> (or max_len)."""
        b = src.size(0)
        enc_out, state = self.encoder(src, src_lengths)
        mask = padding_mask(src_lengths, src.size(1), device=src.device)[:, 0, 0, :]
        y = torch.full((b,), sos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(b, dtype=torch.bool, device=src.device)
        keys_proj = self.decoder.project_keys(enc_out) if self.attention else None
        tokens, weights = [], []
        for _ in range(max_len):
            if self.attention:
                logits, state, w = self.decoder.step(y, state, enc_out, mask, keys_proj)
                weights.append(w.masked_fill(done.unsqueeze(1), 0.0))
            else:
                logits, state = self.decoder.step(y, state)
            y = logits.argmax(-1)
            tokens.append(y.masked_fill(done, pad_id))
            done = done | (y == eos_id)
            if done.all():
                break
        toks = torch.stack(tokens, 1)
        return GreedyOutput(toks, torch.stack(weights, 1) if self.attention else None)


# --------------------------------------------------------------------------------------------------
# Batching, loss and a text-in / text-out helper
# --------------------------------------------------------------------------------------------------

class Seq2SeqBatch(NamedTuple):
    src: torch.Tensor          # (b, n), <pad> = 0 after each source
    src_lengths: torch.Tensor  # (b,)
    tgt_in: torch.Tensor       # (b, T): <sos> y_1 .. y_m, padded
    tgt_out: torch.Tensor      # (b, T): y_1 .. y_m <eos>, padded (pads are ignored by the loss)


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = Vocab.pad_id) -> torch.Tensor:
    n = max(len(s) for s in seqs)
    out = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(list(s), dtype=torch.long)
    return out


def encode_sources(texts: Sequence[str], src_vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Strings -> (src (b, n), lengths (b,)); each string is a sequence of symbols (characters)."""
    if any(len(t) == 0 for t in texts):
        raise ValueError("empty source sequence")
    ids = [src_vocab.encode(list(t)) for t in texts]
    return pad_sequences(ids), torch.tensor([len(s) for s in ids], dtype=torch.long)


def make_seq2seq_batch(pairs: Sequence[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab) -> Seq2SeqBatch:
    """(source, target) string pairs -> padded tensors for teacher forcing."""
    src, lengths = encode_sources([s for s, _ in pairs], src_vocab)
    tgt_in = pad_sequences([tgt_vocab.encode(list(t), sos=True) for _, t in pairs])
    tgt_out = pad_sequences([tgt_vocab.encode(list(t), eos=True) for _, t in pairs])
    return Seq2SeqBatch(src, lengths, tgt_in, tgt_out)


def seq2seq_loss(model: Seq2Seq, batch: Seq2SeqBatch) -> torch.Tensor:
    """Mean token cross-entropy under teacher forcing; padded target positions do not count."""
    logits = model(batch.src, batch.src_lengths, batch.tgt_in).logits   # (b, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=Vocab.pad_id)


class Translation(NamedTuple):
    output: str                       # decoded text (up to <eos>)
    alignment: torch.Tensor | None    # (len(output), len(source)): row i = attention of output char i
    source: str


def translate(model: Seq2Seq, texts: Sequence[str], src_vocab: Vocab, tgt_vocab: Vocab,
              max_len: int = 64) -> list[Translation]:
    """Greedy-decode a batch of source strings (already normalised; unknown symbols become <unk>).

    Each alignment has one row per output character (the <eos> step is left out) and one column
    per source character; rows sum to 1.
    """
    src, lengths = encode_sources(texts, src_vocab)
    toks, weights = model.greedy_decode(src, lengths, max_len)
    return _translations(texts, toks, weights, tgt_vocab, crop_to_source=True)


def _translations(texts: Sequence[str], toks: torch.Tensor, weights: torch.Tensor | None, tgt_vocab: Vocab,
                  crop_to_source: bool) -> list[Translation]:
    """Decoded symbols up to <eos>, with the attention rows of the steps that emitted one."""
    out = []
    for i, text in enumerate(texts):
        keep = []                                   # output steps before <eos> that emitted a symbol
        for t, tok in enumerate(toks[i].tolist()):
            if tok == tgt_vocab.eos_id:
                break
            if tok not in (tgt_vocab.pad_id, tgt_vocab.sos_id):
                keep.append(t)
        symbols = tgt_vocab.decode(toks[i, keep].tolist(), stop_at_eos=False)
        align = None
        if weights is not None:
            align = (weights[i, keep, :len(text)] if crop_to_source else weights[i, keep]).clone()
        out.append(Translation("".join(symbols), align, text))
    return out


# ------------------------------------------------------------------------------------------------
# Inference helpers of the pages
# ------------------------------------------------------------------------------------------------


def translate_one(model: Seq2Seq, text: str, src_vocab: Vocab, tgt_vocab: Vocab, max_len: int) -> Translation:
    """``seq2seq.translate`` of one source, without autograd bookkeeping."""
    with torch.inference_mode():
        return translate(model, [text], src_vocab, tgt_vocab, max_len=max_len)[0]


# ------------------------------------------------------------------------------------------------
# The tutorial's batching: pads run through the LSTM and attention sees them
# ------------------------------------------------------------------------------------------------


def decode_as_tutorial(model: Seq2Seq, texts: Sequence[str], src_vocab: Vocab, tgt_vocab: Vocab,
                       max_len: int) -> list[Translation]:
    """Greedy decoding of a padded batch as the tutorial's ``Encoder`` would run it.

    The tutorial's encoder takes no lengths: every sequence of the batch is padded to the longest,
    the LSTM reads the pads too, its final state (the context vector) is the one after the pads,
    and attention has no mask, so it can put weight on <pad>. Here: every length is set to the
    padded length, which gives exactly that. Each alignment keeps all padded columns.
    """
    src, lengths = encode_sources(texts, src_vocab)
    full = torch.full_like(lengths, src.size(1))
    with torch.inference_mode():
        toks, weights = model.greedy_decode(src, full, max_len)
    return _translations(texts, toks, weights, tgt_vocab, crop_to_source=False)   # keeps the padded columns
