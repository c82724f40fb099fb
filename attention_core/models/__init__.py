"""The trained models of the learned-attention pages and their training: the tasks (``tasks``), the
Seq2Seq with Bahdanau attention (``seq2seq``), the pronoun resolver (``pronoun``), the training loop
(``trainer``) and the recipes of the shipped checkpoints (``recipes``).

Training CLI: ``python -m attention_core.models <task|all|curves>``. torch + numpy only.
"""
