"""``extend.sequence_parallel`` as accelerate's ``ParallelismConfig`` (accelerate 1.15), for runs that take
accelerate's or DeepSpeed's own sequence parallelism. ``train`` does not: it splits rows with
:mod:`repro.parallel.rows` under DDP or any DeepSpeed ZeRO stage, since every method's objective needs the full rows
(``docs/sequence_parallel.md``).

accelerate 1.15 exposes ``accelerate.ParallelismConfig`` with two ways of splitting a sequence over ranks
(:data:`SP_BACKENDS`):

* ``"deepspeed"`` (default): ``sp_size`` with ``sp_backend="deepspeed"``, DeepSpeed's Ulysses / ALST
  (``deepspeed.runtime.sequence_parallel.ulysses_sp.UlyssesSPAttentionHF``), which ``Accelerator.prepare``
  registers with transformers around a core attention (``sp_attn_implementation``: ``sdpa`` or
  ``flash_attention_2/3``) and whose data-loader adapter shards ``input_ids``, ``position_ids`` and the
  shifted labels. The data-parallel degree is then ``num_processes / sequence_parallel``, managed by DeepSpeed.
* ``"torch"``: ``cp_size`` with ``cp_backend="torch"``, PyTorch context parallelism (ring attention over FSDP2's
  ``dp_shard_cp`` mesh); ``dp_shard_size = num_processes / sequence_parallel``.

What runs where: building and validating the config is tested on CPU (``tests/parallel/test_config.py``), and
so is the DeepSpeed path for real: ``Accelerator(deepspeed_plugin=..., parallelism_config=...)`` prepares the
tiny float64 Llama on two gloo CPU processes (ZeRO stage 0, core attention sdpa) and each rank's logits of a
PoSE row's shard equal the single-process full row's (:mod:`repro.parallel.check`, ``mode="deepspeed"``).
DeepSpeed's wrapper replaces the registered ``sdpa`` function, drops the attention mask and attends causally
over the gathered row: packed rows need its flash-attn core (GPU) or this repo's own Ulysses attention
(:mod:`repro.parallel.ulysses`, ``sp_ulysses``), which reads the full row's document boundaries and ran forward
and backward on CPU (logits, loss and every parameter gradient equal to the full row in float64). Not run here:
the ``torch`` backend (context parallelism needs FSDP2 device meshes on GPUs), ZeRO-3 with sequence parallelism
and flash-attn cores.
"""

from __future__ import annotations

from accelerate import ParallelismConfig
from accelerate.utils import DeepSpeedSequenceParallelConfig

SP_BACKENDS: tuple[str, ...] = ("deepspeed", "torch")
"""Sequence-splitting backends of accelerate's ``ParallelismConfig``: DeepSpeed Ulysses/ALST (``sp_size``) or
torch context parallelism (``cp_size``)."""
SP_CORE_ATTENTION: tuple[str, ...] = ("sdpa", "flash_attention_2", "flash_attention_3")
"""Core attentions DeepSpeed's Ulysses wraps (accelerate's ``DeepSpeedSequenceParallelConfig`` allows these and
hub kernels; ``eager`` and ``flex_attention`` are refused)."""


def check_sequence_parallel(sequence_parallel: int, num_processes: int) -> int:
    """``sequence_parallel`` when it is an integer >= 1 that divides ``num_processes``; ValueError naming both
    otherwise. Returns the data-parallel degree ``num_processes / sequence_parallel``."""
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes={num_processes!r}; allowed: an integer >= 1")
    if isinstance(sequence_parallel, bool) or not isinstance(sequence_parallel, int) or sequence_parallel < 1:
        raise ValueError(f"extend.sequence_parallel={sequence_parallel!r}; allowed: an integer >= 1")
    if num_processes % sequence_parallel:
        divisors = [d for d in range(1, num_processes + 1) if num_processes % d == 0]
        raise ValueError(f"extend.sequence_parallel={sequence_parallel} does not divide num_processes="
                         f"{num_processes}; allowed: {divisors}")
    return num_processes // sequence_parallel


def parallelism_config(sequence_parallel: int, num_processes: int, backend: str = "deepspeed",
                       attn_implementation: str = "sdpa", seq_length: int | None = None):
    """accelerate's ``ParallelismConfig`` for ``sequence_parallel`` ranks per row over ``num_processes``
    processes, or None when ``sequence_parallel == 1`` (plain data parallelism, as before).

    ``backend``: one of :data:`SP_BACKENDS`. ``attn_implementation``: DeepSpeed Ulysses' core attention
    (:data:`SP_CORE_ATTENTION`). ``seq_length``: fixed row length for DeepSpeed (None: variable lengths; a fixed
    one must divide by ``sequence_parallel``)."""
    dp = check_sequence_parallel(sequence_parallel, num_processes)
    if backend not in SP_BACKENDS:
        raise ValueError(f"backend={backend!r}; allowed: {', '.join(repr(b) for b in SP_BACKENDS)}")
    if sequence_parallel == 1:
        return None
    if backend == "torch":
        return ParallelismConfig(dp_shard_size=dp, cp_size=sequence_parallel, cp_backend="torch")
    if attn_implementation not in SP_CORE_ATTENTION:
        raise ValueError(f"attn_implementation={attn_implementation!r} under DeepSpeed Ulysses; allowed: "
                         f"{', '.join(SP_CORE_ATTENTION)}")
    if seq_length is not None and (seq_length < 1 or seq_length % sequence_parallel):
        raise ValueError(f"seq_length={seq_length}; allowed: None (variable) or a multiple of "
                         f"sequence_parallel={sequence_parallel}")
    handler = DeepSpeedSequenceParallelConfig(sp_seq_length=seq_length, sp_seq_length_is_variable=seq_length is None,
                                              sp_attn_implementation=attn_implementation)
    return ParallelismConfig(sp_size=sequence_parallel, sp_backend="deepspeed", sp_handler=handler)


def profile_parallelism(profile, num_processes: int, backend: str = "deepspeed"):
    """:func:`parallelism_config` of a profile's ``extend.sequence_parallel`` with its model's attention and
    target window (variable lengths: rows shorter than the window train too)."""
    return parallelism_config(profile.extend.sequence_parallel, num_processes, backend,
                              profile.model.attn_implementation)
